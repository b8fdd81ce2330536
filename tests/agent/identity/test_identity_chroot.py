"""Users, groups, sudo, SSH and passwords applied for real in a debootstrapped Debian bookworm chroot.

The tree comes from ``debian_chroot`` (debootstrap --variant=minbase, cached as a tarball under
~/.cache/cloudseed/identity, built on first use). Every command the modules run goes through
``TargetRoot.run`` and therefore ``chroot``; the checks use the system's own tools in the chroot
(``id``, ``passwd -S``, ``visudo -c``, ``sshd -t``).
"""

from __future__ import annotations

import os
import stat
import subprocess
import time

import pytest
from identity_support import InputDatasource, run

pytestmark = pytest.mark.root


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


def test_users_groups_sudo_keys(chroot, chroot_tree, tmp_path):
    _, alice_key = keypair(tmp_path, "alice")
    cfg = {
        "users": ["default", {
            "name": "alice", "gecos": "Alice A", "groups": ["adm", "developers"], "shell": "/bin/bash",
            "sudo": ["ALL=(ALL) NOPASSWD:/usr/bin/apt", "ALL=(root) /bin/ls"], "ssh_authorized_keys": [alice_key],
            "homedir": "/srv/alice", "uid": 2001,
        }, {"name": "svc", "system": True, "shell": "/usr/sbin/nologin", "sudo": False}],
        "groups": ["developers", {"ops": ["alice", "debian"]}],
    }
    result, _ = run(chroot, "users_groups", cfg)
    assert result.status == "ok", result.reason
    # the user exists with the right groups, shell and home
    entry = chroot.user_entry("alice")
    assert entry[2] == "2001" and entry[4] == "Alice A" and entry[5] == "/srv/alice" and entry[6] == "/bin/bash"
    groups = sh(chroot_tree, "id", "-nG", "alice").split()
    assert {"alice", "adm", "developers", "ops"} <= set(groups)
    home = os.stat(chroot.path("/srv/alice"))
    assert home.st_uid == 2001
    assert {"adm", "sudo", "ops"} <= set(sh(chroot_tree, "id", "-nG", "debian").split())
    assert chroot.user_entry("debian")[6] == "/bin/bash"
    svc = chroot.user_entry("svc")
    assert int(svc[2]) < 1000 and not os.path.exists(chroot.path("/home/svc"))
    # the key is in authorized_keys, 0600, owned by the user
    info = os.stat(chroot.path("/srv/alice/.ssh/authorized_keys"))
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == 2001
    assert alice_key in chroot.read_text("/srv/alice/.ssh/authorized_keys")
    assert stat.S_IMODE(os.stat(chroot.path("/srv/alice/.ssh")).st_mode) == 0o700
    # sudoers: the drop-in passes visudo, rules are in place, the default password state is locked
    sh(chroot_tree, "visudo", "-c")
    sudoers = chroot.read_text("/etc/sudoers.d/90-cloudseed-users")
    assert "alice ALL=(ALL) NOPASSWD:/usr/bin/apt\nalice ALL=(root) /bin/ls\n" in sudoers
    assert "debian ALL=(ALL) NOPASSWD:ALL" in sudoers and "svc" not in sudoers
    assert stat.S_IMODE(os.stat(chroot.path("/etc/sudoers.d/90-cloudseed-users")).st_mode) == 0o440
    assert "alice" in sh(chroot_tree, "sudo", "-l", "-U", "alice")
    assert passwd_status(chroot_tree, "alice") == "L"
    assert passwd_status(chroot_tree, "debian") == "L"
    # a second run (same instance re-provisioned) changes nothing in sudoers
    run(chroot, "users_groups", cfg)
    assert chroot.read_text("/etc/sudoers.d/90-cloudseed-users") == sudoers


def test_bad_inputs_reported_others_applied(chroot, chroot_tree, tmp_path):
    _, good = keypair(tmp_path, "good")
    cfg = {"users": [
        {"name": "carol", "groups": ["no-such-group"], "create_groups": False},
        {"name": "dave", "sudo": "this is not a rule", "lock_passwd": False,
         "ssh_authorized_keys": ["ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC", good]},
        {"name": "erin", "sudo": "ALL=(ALL) ALL"},
    ]}
    before = sorted(os.listdir(chroot.path("/etc/sudoers.d")))
    result, _ = run(chroot, "users_groups", cfg)
    assert result.status == "failed"
    assert "users[0].groups: group 'no-such-group' does not exist" in result.reason
    assert "users[1].sudo: rejected by visudo" in result.reason
    assert "users[1].ssh_authorized_keys[0]: not a valid SSH public key" in result.reason
    # every user still exists; the good parts were applied
    for name in ("carol", "dave", "erin"):
        assert chroot.user_entry(name) is not None
    assert "no-such-group" not in chroot.read_text("/etc/group")
    assert chroot.read_text("/home/dave/.ssh/authorized_keys") == good + "\n"
    sudoers = chroot.read_text("/etc/sudoers.d/90-cloudseed-users")
    assert "erin ALL=(ALL) ALL" in sudoers and "this is not a rule" not in sudoers
    assert sorted(os.listdir(chroot.path("/etc/sudoers.d"))) == sorted(set(before) | {"90-cloudseed-users"})
    sh(chroot_tree, "visudo", "-c")


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


def test_ssh_in_chroot_sshd_accepts(chroot, chroot_tree, tmp_path):
    _, key = keypair(tmp_path, "ds")
    data: dict = {}
    cfg = {"users": ["default"], "ssh_pwauth": True, "ssh_quiet_keygen": True}
    result, _ = run(chroot, "users_groups", {"users": ["default"]})
    result, _ = run(chroot, "ssh", cfg, datasource=InputDatasource(public_keys=[key]), instance_data=data)
    assert result.status == "ok", result.reason
    for keytype in ("rsa", "ecdsa", "ed25519"):
        assert chroot.exists(f"/etc/ssh/ssh_host_{keytype}_key")
    assert chroot.read_text("/etc/ssh/sshd_config.d/50-cloudseed.conf") == "PasswordAuthentication yes\n"
    sh(chroot_tree, "/usr/sbin/sshd", "-t")
    effective = sh(chroot_tree, "/usr/sbin/sshd", "-T", "-C", "user=debian,host=x,addr=127.0.0.1")
    assert "passwordauthentication yes" in effective
    info = os.stat(chroot.path("/home/debian/.ssh/authorized_keys"))
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == int(chroot.user_entry("debian")[2])
    assert len(data["ds"]["published_host_keys"]) == 3


def test_secrets_never_in_log_instance_data_or_world_readable_files(chroot, chroot_tree, tmp_path):
    from cloudseed.agent import instance_data
    from cloudseed.agent.log import setup_logging
    from cloudseed.agent.state import Paths

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
