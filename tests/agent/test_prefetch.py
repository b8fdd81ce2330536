"""The local stage's read-ahead list covers what the network stage goes on to import.

The two stages run in one process against a temporary root, with a cloud-config that touches
the usual modules; every module file the network stage loads that the local stage had not must be
in ``prefetch.network_stage_files()``, so the list keeps up as the code changes.
"""

from __future__ import annotations

import json
import subprocess
import sys

from cloudseed.agent.boot import performance as prefetch

USER_DATA = """#cloud-config
hostname: pre
users: [{name: pf, sudo: "ALL=(ALL) NOPASSWD:ALL"}]
write_files: [{path: /etc/pf.txt, content: "x"}]
bootcmd: [echo boot]
runcmd: [echo run]
"""

CODE = """
import json, os, sys
from cloudseed.cli import main

def read_file(module):  # what the import read: the compiled file when there is one, else the source
    cached, source = getattr(module, "__cached__", None), getattr(module, "__file__", None)
    return cached if cached and os.path.exists(cached) else source

def loaded():
    return {read_file(m) for m in list(sys.modules.values())} - {None}

root = sys.argv[1]
main(["--root", root, "init", "--local"])
after_local = loaded()
main(["--root", root, "init"])
print(json.dumps(sorted(loaded() - after_local)))
"""


def test_network_stage_imports_are_all_read_ahead(tmp_path):
    seed = tmp_path / "var/lib/cloud/seed/nocloud"
    seed.mkdir(parents=True)
    (seed / "meta-data").write_text("instance-id: iid-prefetch\n")
    (seed / "user-data").write_text(USER_DATA)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_text("ID=debian\nVERSION_ID=12\n")
    proc = subprocess.run([sys.executable, "-c", CODE, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    imported = json.loads(proc.stdout.strip().splitlines()[-1])
    listed = set(prefetch.network_stage_files())
    missing = [path for path in imported if path not in listed]
    assert any("yaml" in path for path in imported)  # the network stage is where PyYAML loads
    assert not missing, f"imported by the network stage but not read ahead: {missing}"


def test_warm_skips_what_does_not_exist(tmp_path):
    present = tmp_path / "a.pyc"
    present.write_bytes(b"x" * 100)
    assert prefetch.warm([str(present), str(tmp_path / "missing.pyc")]) == 1
