"""set_passwords: passwords set, locked and expired in a real chroot; secrets never in logs, instance data
or world-readable files.

The ``root`` tests run in a debootstrapped Debian bookworm (``debian_root``/``chroot``: a private
overlay of the cached tree); every command goes through ``TargetRoot.run``, hence ``chroot``, and the
checks use the system's own tools there (``passwd -S``, ``chage -l``, the password checked with the
tree's libcrypt).
"""

from __future__ import annotations

import os
import stat
import subprocess
import time

import pytest

from tests.agent.modules.module_support import run


def sha512_crypt(password: str, salt: str | None = None) -> str:
    """A $6$ crypt hash made by openssl (the crypt module is gone in newer Pythons)."""
    argv = ["openssl", "passwd", "-6"] + (["-salt", salt] if salt else []) + ["-stdin"]
    return subprocess.run(argv, input=password, capture_output=True, text=True, check=True).stdout.strip()


def matches(tree: str, password: str, hashed: str) -> bool:
    """Check a password against a shadow hash with the chroot's libcrypt (yescrypt included), via perl."""
    proc = subprocess.run(["chroot", tree, "perl", "-e", "print crypt($ARGV[0], $ARGV[1])", password, hashed],
                          capture_output=True, text=True, check=True)
    return proc.stdout == hashed


def sh(tree: str, *argv: str) -> str:
    proc = subprocess.run(["chroot", tree, *argv], capture_output=True, text=True)
    assert proc.returncode == 0, f"{argv}: {proc.stderr}"
    return proc.stdout


def keypair(tmp_path, name="k", keytype="ed25519"):
    path = str(tmp_path / name)
    subprocess.run(["ssh-keygen", "-q", "-t", keytype, "-N", "", "-C", f"{name}@test", "-f", path], check=True)
    with open(path) as private, open(path + ".pub") as public:
        return private.read(), public.read().strip()


def passwd_status(tree: str, user: str) -> str:
    return sh(tree, "passwd", "-S", user).split()[1]


@pytest.mark.root
def test_passwords_set_locked_expired(chroot, chroot_tree, capsys):
    hashed = sha512_crypt("hashed-secret-1")
    cfg = {"users": [{"name": "frank", "plain_text_passwd": "plain-secret-1", "lock_passwd": False},
                     {"name": "grace", "hashed_passwd": hashed, "lock_passwd": False},
                     {"name": "heidi", "plain_text_passwd": "locked-secret-1"}]}
    result, _ = run(chroot, "users_groups", cfg)
    assert result.status == "ok", result.reason
    assert passwd_status(chroot_tree, "frank") == "P"
    assert passwd_status(chroot_tree, "grace") == "P"
    assert passwd_status(chroot_tree, "heidi") == "L"  # lock_passwd defaults to true
    shadow = chroot.read_text("/etc/shadow")
    assert f"grace:{hashed}:" in shadow
    frank_hash = next(line.split(":")[1] for line in shadow.splitlines() if line.startswith("frank:"))
    assert matches(chroot_tree, "plain-secret-1", frank_hash)
    assert not matches(chroot_tree, "wrong-password", frank_hash)

    hashed2 = sha512_crypt("hashed-secret-2")
    cfg = {"chpasswd": {"expire": True, "users": [
        {"name": "frank", "password": "plain-secret-2", "type": "text"},
        {"name": "grace", "password": hashed2},
        {"name": "heidi", "type": "RANDOM"},
        {"name": "nobody-here", "password": "x", "type": "text"}]}}
    capsys.readouterr()
    result, _ = run(chroot, "set_passwords", cfg)
    assert result.status == "failed" and "chpasswd.users[3]: user 'nobody-here' does not exist" in result.reason
    err = capsys.readouterr().err
    random_line = next(line for line in err.splitlines() if line.startswith("heidi:"))
    random_password = random_line.split(":", 1)[1]
    assert len(random_password) == 20
    shadow = chroot.read_text("/etc/shadow")
    heidi_hash = next(line.split(":")[1] for line in shadow.splitlines() if line.startswith("heidi:"))
    assert matches(chroot_tree, random_password, heidi_hash)
    assert f"grace:{hashed2}:" in shadow
    assert "password must be changed" in sh(chroot_tree, "chage", "-l", "frank")


@pytest.mark.root
def test_secrets_never_in_log_instance_data_or_world_readable_files(chroot, chroot_tree, tmp_path):
    from cloudseed.agent.state import Paths
    from cloudseed.agent.state import instance_data_json as instance_data
    from cloudseed.agent.state.log import setup_logging

    started = time.time() - 1
    private, public = keypair(tmp_path, "hostkey")
    hashed = sha512_crypt("sekrit-hash-pw")
    secrets = ["sekrit-plain-pw", "sekrit-chpasswd-pw", hashed, private.splitlines()[1]]
    cfg = {"users": [{"name": "ivan", "plain_text_passwd": "sekrit-plain-pw", "lock_passwd": False},
                     {"name": "judy", "hashed_passwd": hashed}],
           "chpasswd": {"users": [{"name": "ivan", "password": "sekrit-chpasswd-pw", "type": "text"},
                                  {"name": "judy", "type": "RANDOM"}], "expire": False},
           "ssh_keys": {"ed25519_private": private, "ed25519_public": public}}
    setup_logging(chroot, debug=True, stage="init")
    data: dict = {}
    try:
        for module in ("users_groups", "ssh", "set_passwords"):
            result, _ = run(chroot, module, cfg, instance_data=data)
            assert result.status == "ok", (module, result.reason)
        paths = Paths(chroot)
        full = instance_data.build(chroot, None, cfg)
        full.update(data)
        instance_data.write(paths, full)
    finally:
        import logging

        for handler in list(logging.getLogger("cloudseed").handlers):
            handler.close()
            logging.getLogger("cloudseed").removeHandler(handler)
    shadow = chroot.read_text("/etc/shadow")
    judy_hash = next(line.split(":")[1] for line in shadow.splitlines() if line.startswith("judy:"))
    secrets.append(judy_hash)
    log_text = chroot.read_text("/var/log/cloudseed.log")
    assert "created user ivan" in log_text  # the log was written
    assert stat.S_IMODE(os.stat(chroot.path("/var/log/cloudseed.log")).st_mode) & 0o004 == 0
    checked = 0
    for directory, _, files in os.walk(chroot_tree):
        if directory.startswith(os.path.join(chroot_tree, "proc")):
            continue
        for name in files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or info.st_mtime < started:
                continue
            world_readable = bool(info.st_mode & 0o004)
            is_log = path.endswith("/var/log/cloudseed.log") or path.endswith("instance-data.json")
            if not (world_readable or is_log):
                continue
            with open(path, "rb") as handle:
                content = handle.read().decode("utf-8", "replace")
            checked += 1
            for secret in secrets:
                assert secret not in content, f"secret found in {path}"
    assert checked >= 3
    assert chroot.exists("/run/cloudseed/instance-data.json")
