"""users_groups: users, groups, sudo and keys applied in a real chroot, bad entries reported, RHEL's
useradd command line, and sudoers compared with the reference.

The reference (Debian's cloud-init 22.4, run with Debian's python3 through ``tests/reference.py``) is
driven directly against temporary paths: ``Distro.write_sudo_rules`` with the drop-in and
``/etc/sudoers`` redirected. Documented differences: product names, dates and template comment prose are
not compared; the sudoers drop-in file name differs.

The ``root`` tests run in a debootstrapped Debian bookworm (``debian_root``/``chroot``: a private
overlay of the cached tree); every command goes through ``TargetRoot.run``, hence ``chroot``, and the
checks use the system's own tools there (``id``, ``visudo -c``, ``passwd -S``).
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess

import pytest

from tests.agent.modules.module_support import RHEL_OS_RELEASE, disk_full_at, run
from tests.reference import reference_python


def test_rhel_useradd_command_line(rhel_target):
    from cloudseed.agent.distros import get_distro

    distro = get_distro(rhel_target, {})
    assert distro.family == "rhel" and distro.default_user()["name"] == "rocky"
    assert distro.ssh_service_name == "sshd"
    argv = distro.useradd_argv("alice", {"gecos": "A", "groups": ["wheel", "adm"], "shell": "/bin/zsh",
                                         "uid": "2001", "system": False, "homedir": "/srv/a"})
    assert argv == ["useradd", "--comment", "A", "--home-dir", "/srv/a", "--uid", "2001", "--shell", "/bin/zsh",
                    "--groups", "wheel,adm", "-m", "alice"]
    with open(rhel_target.path("/etc/os-release"), "w") as handle:
        handle.write(RHEL_OS_RELEASE.replace('ID="rocky"', 'ID="fedora"'))
    assert get_distro(rhel_target, {}).default_user()["name"] == "fedora"


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


@pytest.mark.root
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


def _visudo_runs(chroot, monkeypatch) -> list[list[str]]:
    """Every visudo command the module runs in ``chroot`` (still run, through TargetRoot.run)."""
    runs: list[list[str]] = []
    real = type(chroot).run

    def spy(self, argv, *args, **kwargs):
        if os.path.basename(str(argv[0])) == "visudo":
            runs.append(list(argv))
        return real(self, argv, *args, **kwargs)

    monkeypatch.setattr(type(chroot), "run", spy)
    return runs


@pytest.mark.root
def test_an_empty_authorized_key_entry_is_named_as_empty_and_the_others_installed(chroot, tmp_path):
    """A bare ``-`` (a key left out of a template, a comment after the dash) is YAML null: said to be
    empty, not an unknown key type 'None'; the user and the other keys are still set up."""
    _, key = keypair(tmp_path, "erin")
    result, _ = run(chroot, "users_groups", {"users": [{"name": "erin", "ssh_authorized_keys": [None, key]}]})
    assert result.status == "failed"
    assert "users[0].ssh_authorized_keys[0]: not a valid SSH public key (empty line)" in result.reason, result.reason
    assert "None" not in result.reason
    assert chroot.read_text("/home/erin/.ssh/authorized_keys").strip().endswith(key.split()[-1])


@pytest.mark.root
def test_simple_sudo_rules_need_no_visudo_run(chroot, chroot_tree, monkeypatch):
    """Each visudo costs about 0.3 s under emulation: rules of the common simple shapes are proven
    valid by ``_sudoers_shape`` (tested against visudo in test_sudoers_shape.py) and installed
    without running it; the installed rules are the same."""
    runs = _visudo_runs(chroot, monkeypatch)
    cfg = {"users": ["default", {"name": "frank", "sudo": "ALL=(ALL) NOPASSWD:ALL"},
                     {"name": "gina", "sudo": ["ALL=(root) /bin/ls", "ALL=(ALL) /usr/bin/apt"]}]}
    result, _ = run(chroot, "users_groups", cfg)
    assert result.status == "ok", result.reason
    assert runs == []
    sudoers = chroot.read_text("/etc/sudoers.d/90-cloudseed-users")
    for line in ("debian ALL=(ALL) NOPASSWD:ALL", "frank ALL=(ALL) NOPASSWD:ALL", "gina ALL=(root) /bin/ls",
                 "gina ALL=(ALL) /usr/bin/apt"):
        assert line in sudoers
    sh(chroot_tree, "visudo", "-c")


@pytest.mark.root
def test_several_users_other_sudo_rules_are_checked_by_one_visudo_run(chroot, chroot_tree, monkeypatch):
    """Rules outside the simple shapes: the blocks of all such users are checked together first, and
    none of them again when that passes."""
    runs = _visudo_runs(chroot, monkeypatch)
    cfg = {"users": ["default", {"name": "frank", "sudo": "ALL=(ALL) ALL, !/usr/bin/su"},
                     {"name": "gina", "sudo": ["ALL=(root) /bin/ls", "ALL=(ALL) sudoedit /etc/hosts"]}]}
    result, _ = run(chroot, "users_groups", cfg)
    assert result.status == "ok", result.reason
    assert len(runs) == 1
    sudoers = chroot.read_text("/etc/sudoers.d/90-cloudseed-users")
    for line in ("debian ALL=(ALL) NOPASSWD:ALL", "frank ALL=(ALL) ALL, !/usr/bin/su", "gina ALL=(root) /bin/ls",
                 "gina ALL=(ALL) sudoedit /etc/hosts"):
        assert line in sudoers
    sh(chroot_tree, "visudo", "-c")


@pytest.mark.root
def test_a_bad_sudo_rule_among_several_is_still_named_for_its_user_alone(chroot, chroot_tree, monkeypatch):
    """The run over all blocks complains: each block is then checked on its own, as with one user,
    so the error names the user whose rule is bad and the others' rules are installed."""
    runs = _visudo_runs(chroot, monkeypatch)
    cfg = {"users": [{"name": "hana", "sudo": "ALL=(ALL) ALL, !/bin/su"}, {"name": "ivan", "sudo": "not = a (rule"},
                     {"name": "jo", "sudo": "ALL=(ALL) NOPASSWD:ALL"}]}
    result, _ = run(chroot, "users_groups", cfg)
    assert result.status == "failed"
    assert "users[1].sudo: rejected by visudo" in result.reason
    assert "users[0]" not in result.reason and "users[2]" not in result.reason
    assert len(runs) == 3  # hana's and ivan's together, then each alone (jo's is of a simple shape)
    sudoers = chroot.read_text("/etc/sudoers.d/90-cloudseed-users")
    assert "hana ALL=(ALL) ALL, !/bin/su" in sudoers and "jo ALL=(ALL) NOPASSWD:ALL" in sudoers
    assert "ivan" not in sudoers
    sh(chroot_tree, "visudo", "-c")


_STAMP = re.compile(r"^# (Created|Added) by (cloud-init|cloudseed) v\. \S+ on .*$", re.MULTILINE)


def ref(code: str, *args: str) -> str:
    return reference_python(code, *args).stdout


def normalise_stamps(text: str) -> str:
    return _STAMP.sub(r"# \1 by PRODUCT", text)


SUDO_USERS = [("debian", ["ALL=(ALL) NOPASSWD:ALL"]), ("alice", ["ALL=(ALL) /usr/bin/apt", "ALL=(root) /bin/ls"]),
              ("bob", "ALL=(ALL:ALL) ALL")]


@pytest.mark.reference
@pytest.mark.parametrize("sudoers_base", ["Defaults env_reset\nroot ALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n",
                                          "Defaults env_reset\nroot ALL=(ALL:ALL) ALL\n"])
def test_sudoers_matches(target, tmp_path, sudoers_base):
    base = tmp_path / "sudoers"
    drop_dir = tmp_path / "sudoers.d"
    base.write_text(sudoers_base.replace("/etc/sudoers.d", str(drop_dir)))
    code = ("import sys, json; from cloudinit import distros; from cloudinit.distros import debian\n"
            "d = debian.Distro('debian', {}, None)\n"
            "d.ensure_sudo_dir = lambda path, sudo_base=sys.argv[1]: \\\n"
            "    distros.Distro.ensure_sudo_dir(d, path, sys.argv[1])\n"
            "for user, rules in json.loads(sys.argv[3]):\n"
            "    d.write_sudo_rules(user, rules, sudo_file=sys.argv[2])\n")
    ref(code, str(base), str(drop_dir / "90-cloud-init-users"), json.dumps(SUDO_USERS))
    target.write("/etc/sudoers", sudoers_base, mode=0o440)
    users = [{"name": name, "sudo": rules, "lock_passwd": False} for name, rules in SUDO_USERS]
    from cloudseed.agent.distros import file_header
    from cloudseed.agent.modules._sudoers import write_user_rules
    from cloudseed.agent.users import normalize_users

    # the users themselves need useradd (the chroot tests cover that); here only the sudoers writer runs,
    # fed by the same normalisation and rule parsing users_groups uses
    requests, _ = normalize_users({"users": users}, None)
    from cloudseed.agent.modules._sudoers import rules_from_config

    for request in requests:
        write_user_rules(target, "/etc/sudoers.d/90-cloudseed-users", request.name,
                         rules_from_config(request.spec["sudo"], f"{request.where}.sudo"), file_header(), request.where)
    ours = normalise_stamps(target.read_text("/etc/sudoers.d/90-cloudseed-users"))
    theirs = normalise_stamps((drop_dir / "90-cloud-init-users").read_text())
    assert ours == theirs
    ours_base = normalise_stamps(target.read_text("/etc/sudoers"))
    theirs_base = normalise_stamps(base.read_text()).replace(str(drop_dir), "/etc/sudoers.d")
    assert ours_base == theirs_base


@pytest.mark.root
def test_selinux_user_on_a_kernel_without_selinux_still_creates_the_user(chroot, monkeypatch):
    """Deliberately unlike cloud-init, which passes --selinux-user anyway: useradd refuses it on a kernel
    without SELinux and the user (of cloud-init's own documented example) is never made."""
    from cloudseed.agent.modules import users_groups

    assert not os.path.exists(users_groups.SELINUXFS_ENFORCE), "this test needs a kernel without SELinux"
    cfg = {"users": [{"name": "foobar", "gecos": "Foo B. Bar", "selinux_user": "staff_u"}]}
    result, ctx = run(chroot, "users_groups", cfg)
    assert result.status == "ok", result.reason
    assert chroot.user_entry("foobar")[4] == "Foo B. Bar"
    assert ctx.warnings == ["users_groups: users[0].selinux_user: SELinux is not enabled on this kernel; "
                            "'foobar' is created without the SELinux user 'staff_u'"]
    # where the kernel has SELinux, the option is passed on to useradd as given
    monkeypatch.setattr(users_groups, "SELINUXFS_ENFORCE", "/")
    assert "--selinux-user" in chroot_useradd_argv(chroot, users_groups, {"name": "x", "selinux_user": "staff_u"})


def chroot_useradd_argv(chroot, users_groups, entry: dict) -> list[str]:
    from cloudseed.agent.modules import ModuleContext
    from cloudseed.agent.state import Paths
    from cloudseed.agent.users import UserRequest

    ctx = ModuleContext(root=chroot, paths=Paths(chroot), cfg={}, instance_id="i-test", stage="config",
                        datasource=None, instance_data={})
    spec = users_groups._spec_for_useradd(ctx, UserRequest(name=entry["name"], where="users[0]", spec=entry), [])
    return ctx.distro.useradd_argv(entry["name"], spec)


class _Killed(BaseException):
    """Stands for a kill: nothing catches it."""


@pytest.mark.root
@pytest.mark.parametrize("killed_at", ["/etc/shadow", "/etc/group", "/etc/subgid", "/home/kim/.profile"])
def test_a_user_whose_account_files_were_cut_short_is_made_again(chroot, chroot_tree, monkeypatch, killed_at):
    """The account files written directly (``distros/_account_files``) and the boot killed before
    ``killed_at`` is written (the passwd entry is always there by then): the next run sees the user
    half made, removes it and makes it again, as a clean run makes it."""
    from cloudseed.core.root import TargetRoot

    cfg = {"users": [{"name": "kim", "groups": ["adm"], "shell": "/bin/bash"}]}
    real_write = TargetRoot.write

    def killed_at_group(self, inner, *args, **kwargs):
        if inner == killed_at:
            raise _Killed()
        return real_write(self, inner, *args, **kwargs)

    monkeypatch.setattr(TargetRoot, "write", killed_at_group)
    with pytest.raises(_Killed):
        run(chroot, "users_groups", cfg)
    monkeypatch.setattr(TargetRoot, "write", real_write)
    assert chroot.user_entry("kim") is not None
    result, _ = run(chroot, "users_groups", cfg)
    assert result.status == "ok", result.reason
    entry = chroot.user_entry("kim")
    assert entry[2] == entry[3] and f"kim:x:{entry[3]}:\n" in chroot.read_text("/etc/group")
    assert "kim" in sh(chroot_tree, "id", "-nG", "kim").split() and "adm" in sh(chroot_tree, "id", "-nG", "kim")
    home = os.stat(chroot.path("/home/kim"))
    assert (home.st_uid, home.st_gid) == (int(entry[2]), int(entry[3]))
    assert os.path.isfile(chroot.path("/home/kim/.bashrc"))
    for check in ("pwck", "grpck"):  # the image's own system users lack homes: only kim's lines matter
        proc = subprocess.run(["chroot", chroot_tree, check, "-r"], capture_output=True, text=True)
        assert "kim" not in proc.stdout + proc.stderr


@pytest.mark.root
def test_a_user_that_a_full_disk_cut_short_is_removed_at_once(chroot, monkeypatch):
    """A full disk while the home is filled (the account files written): the user is removed in the same
    run, so no later module of the boot writes into a home that the next run, making the user again,
    would remove (a deferred file of the user's was lost so, with write_files_deferred recorded done)."""
    cfg = {"users": [{"name": "kim", "shell": "/bin/bash"}]}
    with monkeypatch.context() as patched:
        disk_full_at(patched, "/home/kim/.profile")
        result, _ = run(chroot, "users_groups", cfg)
    assert result.status == "failed" and "No space left on device" in result.reason, result.reason
    assert "what it had made was removed" in result.reason, result.reason
    assert chroot.user_entry("kim") is None
    assert "kim:" not in chroot.read_text("/etc/group")
    assert not os.path.exists(chroot.path("/home/kim"))
    # a deferred file owned by the user now fails (written when the module runs again), not lost later
    deferred = {"write_files": [{"path": "/home/kim/later.txt", "content": "x", "owner": "kim:kim", "defer": True}]}
    later, _ = run(chroot, "write_files_deferred", deferred, stage="final")
    assert later.status == "failed" and "kim" in later.reason, later.reason
    result, _ = run(chroot, "users_groups", cfg)
    assert result.status == "ok", result.reason
    assert os.path.isfile(chroot.path("/home/kim/.profile"))
