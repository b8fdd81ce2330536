"""``cloudseed lab``'s options that do not go together, and bad files, are refused before anything boots."""

from __future__ import annotations

import subprocess
import sys

import pytest


def lab(*args: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cloudseed", "lab", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


@pytest.mark.parametrize("args, message", [
    (["--image", "x.qcow2", "--repeat"], "--image boots a cloud image as it is"),
    (["--image", "x.qcow2", "--expect", "e.yaml"], "--image boots a cloud image as it is"),
    (["--keep", "--repeat"], "--keep keeps one booted VM"),
    (["--parallel", "2", "--user-data", "ud.yaml"], "--parallel runs every file of a directory"),
    (["--parallel", "0", "--user-data", "."], "--parallel N: N is at least 1"),
    (["--user-data", "."], "is a directory: that is for --parallel N"),
    (["--watch"], "--watch needs a file to watch"),
    (["--compare", "--repeat"], "--compare runs once"),
    (["--compare", "--agent", "reference"], "--compare boots both agents itself"),
    (["--repeat", "--agent", "none"], "snapshots hold an agent before it reads its seed"),
    (["--expect", "e.yaml", "--user-data", "ud.yaml"],
     "e.yaml: line 1, fiels: unknown section (did you mean 'files'?)"),
    (["--user-data", "missing.yaml", "--repeat"], "missing.yaml"),
])
def test_refused_with_a_message_before_anything_boots(tmp_path, args, message):
    (tmp_path / "ud.yaml").write_text("#cloud-config\n{}\n")
    (tmp_path / "e.yaml").write_text("fiels: {}\n")
    proc = lab(*args, cwd=str(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()
