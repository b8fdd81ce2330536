"""ssh_authkey_fingerprints: the table of a user's authorized keys.
"""

from __future__ import annotations

from tests.agent.modules.module_support import run


def test_authkey_fingerprints_table(target, tmp_path, capsys):
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEnfsZ9IJ0fFKWfZKeF46ofgWV3b66XqX7RWsT8G1aTA me@example"
    with open(target.path("/etc/passwd"), "a") as handle:
        handle.write("debian:x:1000:1000::/home/debian:/bin/bash\n")
    target.write("/home/debian/.ssh/authorized_keys", key + "\n", mode=0o600)
    run(target, "ssh_authkey_fingerprints", {"users": ["default"]})
    err = capsys.readouterr().err
    assert "Authorized keys from /home/debian/.ssh/authorized_keys for user debian" in err
    assert "SHA256:" in err and "me@example" in err
