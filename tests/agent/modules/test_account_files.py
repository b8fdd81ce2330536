"""Users made by writing the account files (``distros/_account_files``) against users made by the real
``useradd``: the same matrix of users in two private copies of a real Debian bookworm tree, one
through ``useradd`` (the base ``Distro.add_user``), one through Debian's ``add_user`` (the files
written directly where the case is simple, ``useradd`` otherwise), then every file either run
changed compared: the overlay's upper layer of each copy holds exactly what changed (passwd,
shadow, group, gshadow, subuid, subgid and their ``-`` backups, the homes and what ``/etc/skel``
put in them, the lock file, the mail spool, lastlog/faillog), with content, mode, owner, and the
times ``useradd`` copies (the backups', the skeleton's).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time

import pytest

from cloudseed.agent.distros import Distro, get_distro
from cloudseed.core.root import TargetRoot
from tests.agent.identity import debian_chroot

# (name, spec as users_groups hands it to add_user, made directly?)
MATRIX = [
    ("plain", {}, True),
    ("grouped", {"groups": ["adm", "sudo", "users"], "shell": "/bin/bash", "gecos": "Grouped User,Room 1,,"}, True),
    ("withuid", {"uid": "2500"}, True),
    ("after", {}, True),                                   # one more than the highest: 2501
    ("collide", {}, True),                                 # GID 2502 taken by 'blocker': the next free GID
    ("high", {"uid": "70000", "groups": ["sudo"]}, True),  # outside UID_MIN..UID_MAX: no subordinate IDs
    ("nohome", {"no_create_home": True}, True),
    ("elsewhere", {"homedir": "/srv/elsewhere", "shell": "/usr/sbin/nologin"}, True),
    ("nolog", {"no_log_init": True, "groups": ["users"]}, True),
    ("sysacct", {"system": True, "no_create_home": True}, False),
    ("expiring", {"expiredate": "2030-01-01"}, False),
    ("prim", {"primary_group": "users"}, False),
    ("last", {"groups": ["adm"]}, True),
]
HOMES = [f"/home/{name}" for name, spec, _ in MATRIX if not spec.get("no_create_home")] + ["/srv/elsewhere"]
PREPARE = [  # the same in both copies, before the matrix
    ["groupadd", "-g", "2502", "blocker"],
    ["sh", "-c", "printf 'someone:100000:65536\\nother:300000:65536\\n' > /etc/subuid"],
    ["sh", "-c", "printf 'someone:100000:65536\\n' > /etc/subgid"],
    ["sh", "-c", "echo x > /etc/skel/.settings && chmod 0600 /etc/skel/.settings && "
                 "touch -d 2020-01-02T03:04:05 /etc/skel/.settings"],
]


def _full_spec(spec: dict) -> dict:
    out = {"system": False, "no_create_home": False, "no_user_group": False, "no_log_init": False, "groups": []}
    out.update(spec)
    return out


def _changes(upper: str) -> dict[str, tuple]:
    """What the overlay's upper layer holds: path -> (kind, mode, uid, gid, content or target, times kept)."""
    found = {}
    for directory, dirs, files in os.walk(upper):
        for entry in dirs + files:
            host = os.path.join(directory, entry)
            rel = "/" + os.path.relpath(host, upper)
            info = os.lstat(host)
            content = None
            if stat.S_ISREG(info.st_mode):
                with open(host, "rb") as handle:
                    content = handle.read()
            elif stat.S_ISLNK(info.st_mode):
                content = os.readlink(host)
            # useradd copies the times of the skeleton's files; a backup gets the old file's time in whole
            # seconds (that time differs between the two copies: only its resolution is compared)
            times = None
            if any(rel.startswith(top + "/") for top in HOMES):
                times = info.st_mtime_ns
            elif rel.startswith("/etc/") and rel.endswith("-"):
                times = f"whole seconds: {info.st_mtime_ns % 10**9 == 0}"
            found[rel] = (stat.S_IFMT(info.st_mode), oct(stat.S_IMODE(info.st_mode)), info.st_uid, info.st_gid,
                          content, times)
    return found


@pytest.mark.root
def test_users_written_directly_are_what_useradd_makes(_debian_base, monkeypatch):
    # shadow-utils dates the password change by SOURCE_DATE_EPOCH when set, as the direct path does:
    # both sides get the same day whatever the clock does during the test
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    os_release = None
    results = {}
    with debian_chroot.overlay([_debian_base]) as (merged_a, upper_a), \
            debian_chroot.overlay([_debian_base]) as (merged_b, upper_b):
        for merged in (merged_a, merged_b):
            for argv in PREPARE:
                subprocess.run(["chroot", merged, *argv], check=True)
        before = {"a": set(_changes(upper_a)), "b": set(_changes(upper_b))}
        assert before["a"] == before["b"]
        by_command = get_distro(TargetRoot(merged_a), {})
        direct = get_distro(TargetRoot(merged_b), {})
        os_release = direct.os_release
        assert direct.family == "debian" and os_release.get("ID") == "debian"
        from cloudseed.agent.distros import _account_files

        made_directly = []
        real = _account_files.add_user_directly

        def counted(root, name, spec, release, log=None):
            done = real(root, name, spec, release, log)
            if done:
                made_directly.append(name)
            return done

        monkeypatch.setattr(_account_files, "add_user_directly", counted)
        for name, spec, _ in MATRIX:
            Distro.add_user(by_command, name, _full_spec(spec))
            direct.add_user(name, _full_spec(spec))
        results["a"], results["b"] = _changes(upper_a), _changes(upper_b)
        lock_mode = oct(stat.S_IMODE(os.stat(os.path.join(merged_b, "etc/.pwd.lock")).st_mode))
    assert made_directly == [name for name, _, direct in MATRIX if direct]
    a, b = results["a"], results["b"]
    assert (sorted(set(a) - set(b)), sorted(set(b) - set(a))) == ([], [])  # (only useradd's, only ours)
    fields = ("kind", "mode", "uid", "gid", "content", "mtime")
    different = {path: {fields[i]: (a[path][i], b[path][i]) for i in range(len(fields)) if a[path][i] != b[path][i]}
                 for path in a if a[path] != b[path]}
    assert different == {}  # each: {what: (useradd's, ours)}
    # the comparison saw what matters
    for path in ("/etc/passwd", "/etc/passwd-", "/etc/shadow-", "/etc/gshadow", "/etc/subuid", "/etc/subgid",
                 "/home/plain/.bashrc", "/home/last/.settings", "/srv/elsewhere/.profile"):
        assert path in a, path
    passwd = a["/etc/passwd"][4].decode()
    assert "withuid:x:2500:2500:" in passwd and "after:x:2501:2501:" in passwd and "collide:x:2502:2503:" in passwd
    assert b"last:165536:65536\n" not in a["/etc/subuid"][4] and b"plain:165536:65536\n" in a["/etc/subuid"][4]
    assert lock_mode == "0o600"
    assert ":!:19675:0:99999:7:::\n" in a["/etc/shadow"][4].decode()  # 1700000000 // 86400


@pytest.mark.root
def test_cases_that_are_not_simple_change_nothing(debian_root, monkeypatch):
    from cloudseed.agent.distros._account_files import add_user_directly

    release = {"ID": "debian"}
    tree = debian_root.top
    snapshot = {p: debian_root.read_bytes(p) for p in ("/etc/passwd", "/etc/group", "/etc/shadow")}
    assert not add_user_directly(debian_root, "x1", _full_spec({"system": True}), release)
    assert not add_user_directly(debian_root, "x1", _full_spec({}), {"ID": "ubuntu"})
    assert not add_user_directly(debian_root, "Upper", _full_spec({}), release)
    assert not add_user_directly(debian_root, "root", _full_spec({}), release)          # exists
    assert not add_user_directly(debian_root, "x1", _full_spec({"groups": ["nogroup", "nosuch"]}), release)
    assert not add_user_directly(debian_root, "x1", _full_spec({"uid": "0"}), release)  # taken
    assert not add_user_directly(debian_root, "x1", _full_spec({"homedir": "/home/../srv/x1"}), release)
    with open(os.path.join(tree, "etc/passwd.lock"), "w"):
        pass  # a shadow-utils tool at work
    assert not add_user_directly(debian_root, "x1", _full_spec({}), release)
    os.unlink(os.path.join(tree, "etc/passwd.lock"))
    os.mkdir(os.path.join(tree, "etc/skel/.config"))  # useradd copies it empty (not reproduced)
    assert not add_user_directly(debian_root, "x1", _full_spec({}), release)
    os.rmdir(os.path.join(tree, "etc/skel/.config"))
    with open(os.path.join(tree, "etc/login.defs"), "a") as handle:
        handle.write("MAX_MEMBERS_PER_GROUP 10\n")
    assert not add_user_directly(debian_root, "x1", _full_spec({}), release)
    for path, content in snapshot.items():
        assert debian_root.read_bytes(path) == content
    assert not debian_root.exists("/home/x1")


@pytest.mark.root
def test_the_lock_is_shadow_utils_own(debian_root):
    """While the files are being written, a shadow-utils tool (here ``useradd`` itself) waits for
    ``/etc/.pwd.lock``; while a tool holds it, writing them waits."""
    from cloudseed.agent.distros import _account_files

    fd = _account_files._lock(debian_root)
    try:
        proc = subprocess.run(["timeout", "3", "chroot", debian_root.top, "useradd", "-m", "waiter"],
                              capture_output=True)
        assert proc.returncode != 0 and debian_root.user_entry("waiter") is None
    finally:
        os.close(fd)
    # a holder outside the chroot: the lock is the file's, whoever takes it
    holder = subprocess.Popen([sys.executable, "-c",
                               "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
                               "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
                               "print('held', flush=True)\n"
                               "time.sleep(1.5)\n", debian_root.path("/etc/.pwd.lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        fd = _account_files._lock(debian_root)
        waited = time.monotonic() - started
        os.close(fd)
        assert waited > 0.8
    finally:
        holder.wait(timeout=10)
