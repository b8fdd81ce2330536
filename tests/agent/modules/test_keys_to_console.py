"""keys_to_console: the fingerprints printed match ssh-keygen's.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.agent.modules.module_support import run


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")
def test_keys_to_console_matches_ssh_keygen(target, capsys):
    run(target, "ssh", {"ssh_genkeytypes": ["ed25519", "rsa", "dsa"], "ssh_quiet_keygen": True})
    capsys.readouterr()
    result, _ = run(target, "keys_to_console", {})
    assert result.status == "ok"
    err = capsys.readouterr().err
    for keytype in ("ed25519", "rsa"):
        expected = subprocess.run(["ssh-keygen", "-l", "-f", target.path(f"/etc/ssh/ssh_host_{keytype}_key.pub")],
                                  capture_output=True, text=True, check=True).stdout.split()
        line = next(x for x in err.splitlines() if expected[1] in x)
        assert line.split()[0] == expected[0] and line.endswith(expected[-1])  # bits and (TYPE)
    keys_part = err.split("-----BEGIN SSH HOST KEY KEYS-----")[1]
    assert "ssh-ed25519 " in keys_part and "ssh-dss " not in keys_part
