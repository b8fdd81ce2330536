"""ansible: a real ``ansible-pull`` of a git repository served on loopback, and the commands around it.

ansible-core is in Debian 12's archive and installed on this machine (scripts/setup.sh). The
module runs against a temporary root whose /usr is this machine's, bind-mounted read-only (with
its own /etc, /tmp, /root and a ``deploy`` user), so the real ansible-pull, git and runuser run
chrooted there; the playbook repository is served by ``git daemon`` on 127.0.0.1 and a random
port, and the playbook writes a file that is read back. The install paths (distro package, pip)
are checked as exact commands through recording scripts in a busybox root.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest

from cloudseed.agent.modules.ansible import option_args, pull_command
from tests.agent.modules.cm_support import apt_recorder, calls, closed_port, recorder
from tests.agent.modules.module_support import run

DEPLOY_UID = 1500
PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: leave a proof of the run
      copy:
        dest: /tmp/pulled.txt
        content: "{{ proof }} as {{ lookup('env', 'USER') | default('root', true) }} home {{ lookup('env', 'HOME')
          }}\\n"
    - name: a task the user skips
      copy:
        dest: /tmp/skipped.txt
        content: "should not be here\\n"
      tags: [slow]
"""


def _git(*args: str, cwd: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"PATH": os.environ["PATH"], "HOME": cwd, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"})


@pytest.fixture
def git_server(tmp_path):
    """A repository ``playbooks.git`` (branches main and feature) served by git daemon on loopback."""
    if not shutil.which("git") or not os.path.exists("/usr/lib/git-core/git-daemon"):
        pytest.skip("git (with git daemon) not installed")
    work, base = tmp_path / "work", tmp_path / "served"
    work.mkdir()
    base.mkdir()
    _git("init", "-q", "-b", "main", cwd=str(work))
    (work / "site.yml").write_text(PLAYBOOK.replace("{{ proof }}", "main"))
    _git("add", "site.yml", cwd=str(work))
    _git("commit", "-q", "-m", "main", cwd=str(work))
    _git("checkout", "-q", "-b", "feature", cwd=str(work))
    (work / "site.yml").write_text(PLAYBOOK.replace("{{ proof }}", "feature"))
    _git("commit", "-q", "-am", "feature", cwd=str(work))
    _git("checkout", "-q", "main", cwd=str(work))
    _git("clone", "-q", "--bare", str(work), str(base / "playbooks.git"), cwd=str(tmp_path))
    port = closed_port()
    daemon = subprocess.Popen(["git", "daemon", "--export-all", f"--base-path={base}", "--listen=127.0.0.1",
                               f"--port={port}", "--reuseaddr", str(base)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("git daemon did not start")
                time.sleep(0.05)
        yield f"git://127.0.0.1:{port}/playbooks.git"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


@pytest.fixture
def host_root(tmp_path):
    """A root whose /usr is this machine's (read-only bind mount) and whose /etc is a copy of it."""
    if os.geteuid() != 0 or not shutil.which("ansible-pull") or not shutil.which("runuser"):
        pytest.skip("needs root, ansible-core and runuser")
    from cloudseed.core.root import TargetRoot

    top = tmp_path / "hostroot"
    top.mkdir()
    for name in ("bin", "sbin", "lib", "lib64"):
        if os.path.islink(f"/{name}"):
            os.symlink(os.readlink(f"/{name}"), top / name)
    shutil.copytree("/etc", top / "etc", symlinks=True, ignore_dangling_symlinks=True)
    for d in ("usr", "proc", "dev", "root", "var/tmp", "var/log", "home/deploy"):
        (top / d).mkdir(parents=True, exist_ok=True)
    os.makedirs(top / "tmp", exist_ok=True)
    os.chmod(top / "tmp", 0o1777)
    for name, minor in (("null", 3), ("zero", 5), ("random", 8), ("urandom", 9)):
        os.mknod(top / "dev" / name, 0o20666, os.makedev(1, minor))
        os.chmod(top / "dev" / name, 0o666)  # mknod's mode went through the umask
    (top / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                    f"deploy:x:{DEPLOY_UID}:{DEPLOY_UID}::/home/deploy:/bin/sh\n")
    (top / "etc/group").write_text(f"root:x:0:\ndeploy:x:{DEPLOY_UID}:\n")
    os.chown(top / "home/deploy", DEPLOY_UID, DEPLOY_UID)
    usr, proc, shm = str(top / "usr"), str(top / "proc"), str(top / "dev/shm")
    mounted = []
    try:
        subprocess.run(["mount", "--bind", "/usr", usr], check=True)
        mounted.append(usr)
        subprocess.run(["mount", "-o", "remount,bind,ro", usr], check=True)
        subprocess.run(["mount", "-t", "proc", "proc", proc], check=True)
        mounted.append(proc)
        os.makedirs(shm, exist_ok=True)  # Python's multiprocessing (ansible's workers) needs it
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777,size=16m", "shm", shm], check=True)
        mounted.append(shm)
        yield TargetRoot(str(top))
    finally:
        for path in reversed(mounted):
            subprocess.run(["umount", path], check=False)
            if os.path.ismount(path):
                subprocess.run(["umount", "-l", path], check=True)
        assert not any(os.path.ismount(p) for p in mounted)  # never leave /usr under a temporary tree


def test_ansible_pull_runs_as_run_user_against_a_loopback_repository(host_root, git_server):
    root = host_root
    result, _ = run(root, "ansible", {"ansible": {
        "install_method": "distro", "package_name": "ansible-core", "run_user": "deploy",
        "pull": {"url": git_server, "playbook_name": "site.yml", "checkout": "feature", "skip_tags": "slow",
                 "full": False, "clean": True}}}, stage="final")
    assert result.status == "ok", result.reason
    assert root.read_text("/tmp/pulled.txt") == "feature as deploy home /home/deploy\n"
    assert root.stat("/tmp/pulled.txt").st_uid == DEPLOY_UID  # run as the user, not as root
    assert not root.exists("/tmp/skipped.txt")  # skip_tags reached ansible
    assert root.isdir("/home/deploy/.ansible/pull")  # the checkout is the user's
    output = root.read_text("/var/log/cloudseed-output.log")
    command = f"ansible-pull --url={git_server} --checkout=feature --skip-tags=slow --clean site.yml"
    assert "--- " in output and command in output


def test_a_missing_playbook_is_ansible_pulls_own_error(host_root, git_server):
    result, _ = run(host_root, "ansible", {"ansible": {"pull": {"url": git_server, "playbook_name": "nosuch.yml"}}},
                    stage="final")
    assert result.status == "failed"
    assert result.reason.startswith("ansible.pull: ansible-pull exited ")
    assert result.reason.endswith("ERROR! Could not find a playbook to run.")
    assert not host_root.exists("/tmp/pulled.txt")


def test_an_unreachable_repository_fails_in_bounded_time(host_root):
    started = time.monotonic()
    result, _ = run(host_root, "ansible", {"ansible": {"pull": {
        "url": f"git://127.0.0.1:{closed_port()}/playbooks.git", "playbook_name": "site.yml"}}}, stage="final")
    assert time.monotonic() - started < 120
    assert result.status == "failed" and result.reason.startswith("ansible.pull: ansible-pull exited")


def test_galaxy_and_controller_commands_as_run_user(shell_target):
    root = shell_target
    with open(root.path("/etc/passwd"), "a") as handle:
        handle.write("ubuntu:x:1000:1000::/home/ubuntu:/bin/sh\n")
    root.makedirs("/home/ubuntu/repo")
    # runuser records and runs what follows "--"; the other tools only record
    recorder(root, "runuser", 'while [ "$1" != "--" ]; do shift; done; shift; exec "$@"')
    for tool in ("ansible-pull", "ansible-galaxy", "git", "ansible-playbook"):
        recorder(root, tool)
    result, _ = run(root, "ansible", {"ansible": {
        "run_user": "ubuntu", "ansible_config": "/etc/ansible/site.cfg",
        "galaxy": {"actions": [["ansible-galaxy", "collection", "install", "community.general"]]},
        "setup_controller": {
            "repositories": [{"source": "https://git.example.com/repo.git", "path": "/home/ubuntu/repo"}],
            "run_ansible": [{"playbook_dir": "/home/ubuntu/repo", "playbook_name": "site.yml", "forks": 2,
                             "check": True, "diff": False, "inventory": "hosts"}]}}}, stage="final")
    assert result.status == "ok", result.reason
    env = ("env HOME=/home/ubuntu PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:"
           "/home/ubuntu/.local/bin LANG=C.UTF-8 ANSIBLE_FORCE_COLOR=0 USER=ubuntu LOGNAME=ubuntu "
           "ANSIBLE_CONFIG=/etc/ansible/site.cfg")
    assert calls(root) == [
        f"runuser -u ubuntu -- {env} ansible-galaxy collection install community.general",
        "ansible-galaxy collection install community.general",
        f"runuser -u ubuntu -- {env} git clone https://git.example.com/repo.git /home/ubuntu/repo",
        "git clone https://git.example.com/repo.git /home/ubuntu/repo",
        f"runuser -u ubuntu -- {env} ansible-playbook site.yml --forks=2 --check --inventory=hosts",
        "ansible-playbook site.yml --forks=2 --check --inventory=hosts",
    ]


def test_distro_install_through_the_package_manager(shell_target):
    root = shell_target
    apt_recorder(root)
    result, _ = run(root, "ansible", {"ansible": {"package_name": "ansible-core",
                                                  "pull": {"url": "https://x/r.git", "playbook_name": "a.yml"}}},
                    stage="final")
    # the recording apt-get installs nothing: the module says ansible-pull is still missing
    assert result.status == "failed"
    assert result.reason.startswith("ansible: ansible-pull is not available after installing ansible-core")
    assert calls(root)[-1].endswith("--assume-yes --quiet install ansible-core")


def test_missing_package_manager_names_the_package(target):
    result, _ = run(target, "ansible", {"ansible": {"pull": {"url": "https://x/r.git", "playbook_name": "a.yml"}}},
                    stage="final")
    assert result.status == "failed" and result.reason.startswith("ansible: installing ansible: apt-get")


def test_pip_install_as_run_user(shell_target):
    root = shell_target
    with open(root.path("/etc/passwd"), "a") as handle:
        handle.write("ubuntu:x:1000:1000::/home/ubuntu:/bin/sh\n")
    recorder(root, "runuser", 'while [ "$1" != "--" ]; do shift; done; shift; exec "$@"')
    # python3 -m pip: says its version; "install" puts ansible-pull in the user's ~/.local/bin
    recorder(root, "python3", 'case "$3" in --version) echo "pip 23.0.1 from /usr/lib/python3/dist-packages/pip";; '
                              'install) mkdir -p /home/ubuntu/.local/bin; echo "#!/bin/sh" > '
                              '/home/ubuntu/.local/bin/ansible-pull;; esac')
    from tests.agent.modules.cm_support import add_applets

    add_applets(root, "chmod")
    result, _ = run(root, "ansible", {"ansible": {"install_method": "pip", "package_name": "ansible-core",
                                                  "run_user": "ubuntu"}}, stage="final")
    assert result.status == "ok", result.reason
    assert [c for c in calls(root) if c.startswith("python3")] == [
        "python3 -m pip --version",
        "python3 -m pip install --no-input --break-system-packages --user ansible-core"]


def test_command_line_of_pull_options():
    assert option_args({"checkout": "v1", "full": True, "diff": False, "accept_host_key": True,
                        "vault_password_file": "/root/.vault", "timeout": "30"}) == [
        "--checkout=v1", "--full", "--accept-host-key", "--vault-password-file=/root/.vault", "--timeout=30"]
    assert pull_command({"url": "https://h/r.git", "playbook_name": "p.yml", "verify_commit": True}) == [
        "ansible-pull", "--url=https://h/r.git", "--verify-commit", "p.yml"]


def test_bad_input_is_named_and_nothing_runs(shell_target):
    root = shell_target
    apt_recorder(root)
    for cfg, message in (
        ({"pull": {"url": 5, "playbook_name": "a.yml"}}, "ansible.pull.url: expected string"),
        ({"pull": {"url": "https://x/r.git"}}, "ansible.pull"),
        ({"install_method": "brew"}, "ansible.install_method"),
        ({"galaxy": {"actions": ["ansible-galaxy install x"]}}, "ansible.galaxy.actions[0]: expected array"),
        ({"setup_controller": {}}, "ansible.setup_controller: give repositories or run_ansible"),
        ({"run_user": "nobody-here", "pull": {"url": "u", "playbook_name": "p"}},
         "ansible.run_user: user 'nobody-here' does not exist"),
    ):
        result, _ = run(root, "ansible", {"ansible": cfg}, stage="final")
        assert result.status == "failed" and message in result.reason, (cfg, result.reason)
    assert calls(root) == []


def test_credentials_in_the_repository_url_stay_out_of_status_and_logs(shell_target):
    root = shell_target
    recorder(root, "ansible-pull",
             'echo "fatal: could not read from https://bot:s3cr3t-token@git.example.com/r.git" >&2', status=1)
    result, _ = run(root, "ansible", {"ansible": {"pull": {"url": "https://bot:s3cr3t-token@git.example.com/r.git",
                                                           "playbook_name": "site.yml"}}}, stage="final")
    assert result.status == "failed" and "fatal: could not read from https://***@git.example.com/r.git" in result.reason
    assert "s3cr3t-token" not in result.reason
    assert "s3cr3t-token" not in root.read_text("/var/log/cloudseed-output.log")


ANSIBLE_DOCUMENTS = [
    {"pull": {"url": "https://git.example.com/playbooks.git", "playbook_name": "site.yml"}},
    {"pull": {"url": "https://git.example.com/playbooks.git", "playbook_name": "ubuntu.yml", "checkout": "v2",
              "full": True, "diff": True, "accept_host_key": True, "clean": False, "skip_tags": "slow",
              "tags": "base,web", "vault_password_file": "/root/.vault", "timeout": "30", "sleep": "5",
              "private_key": "/root/.ssh/deploy", "module_name": "git", "connection": "local"}},
    {"ansible_config": "/etc/ansible/site.cfg",
     "galaxy": {"actions": [["ansible-galaxy", "collection", "install", "community.general"],
                            ["ansible-galaxy", "role", "install", "geerlingguy.nginx"]]},
     "pull": {"url": "git@git.example.com:ops/playbooks.git", "playbook_name": "web.yml", "verify_commit": False}},
    {"setup_controller": {
        "repositories": [{"path": "/home/ansible/repo", "source": "https://git.example.com/repo.git"}],
        "run_ansible": [{"playbook_dir": "/home/ansible/repo", "playbook_name": "lxd.yml", "forks": 2,
                         "inventory": "hosts", "check": True, "extra_vars": "a=1"},
                        {"playbook_dir": "/home/ansible/repo", "playbook_name": "site.yml"}]}},
    {"galaxy": {"actions": [["ansible-galaxy", "install", "-r", "requirements.yml"]]},
     "pull": {"url": "https://git.example.com/p.git", "playbook_name": "local.yml", "inventory": "localhost,",
              "module_path": "/opt/modules", "vault_id": "prod@/root/.vault-prod"}},
]


@pytest.mark.reference
@pytest.mark.parametrize("document", ANSIBLE_DOCUMENTS, ids=range(len(ANSIBLE_DOCUMENTS)))
def test_same_commands_as_cloud_init(shell_target, tmp_path, document):
    """The galaxy, ansible-pull, git and ansible-playbook command lines of cloud-init 22.4's module
    (both see ansible installed);
    deliberate difference: a ``true`` option of ``run_ansible`` is a bare flag (``--check``; cloud-init
    writes ``--check=True``, which ansible-playbook refuses)."""
    from tests.agent.modules.cm_support import reference_run

    cfg = dict(document, install_method="distro", package_name="ansible-core")
    _, ref_commands = reference_run(tmp_path, "ansible", {"ansible": cfg},
                                    stdout={"--version": "ansible-pull [core 2.14.18]"})
    root = shell_target
    root.makedirs("/home/ansible/repo")
    for tool in ("ansible-pull", "ansible-galaxy", "git", "ansible-playbook"):
        recorder(root, tool)
    result, _ = run(root, "ansible", {"ansible": cfg}, stage="final")
    assert result.status == "ok", result.reason
    # the version query is not compared: cloud-init asks it before every pull, cloudseed only for --diff
    theirs = [" ".join(c).replace("=True", "") for c in ref_commands if c != ["ansible-pull", "--version"]]
    assert [c for c in calls(root) if c != "ansible-pull --version"] == theirs


def test_controller_clones_and_runs_playbooks_for_real(host_root, git_server):
    """setup_controller with the real git and ansible-playbook, and a real (offline) galaxy action."""
    root = host_root
    result, _ = run(root, "ansible", {"ansible": {
        "run_user": "deploy",
        "galaxy": {"actions": [["ansible-galaxy", "role", "init", "webserver", "--init-path", "/home/deploy/roles"]]},
        "setup_controller": {
            "repositories": [{"source": git_server, "path": "/home/deploy/repo"}],
            "run_ansible": [{"playbook_dir": "/home/deploy/repo", "playbook_name": "site.yml",
                             "inventory": "localhost,", "connection": "local", "skip_tags": "slow"}]}}},
        stage="final")
    assert result.status == "ok", result.reason
    assert root.isfile("/home/deploy/repo/site.yml") and root.stat("/home/deploy/repo/site.yml").st_uid == DEPLOY_UID
    assert root.read_text("/tmp/pulled.txt") == "main as deploy home /home/deploy\n"
    assert not root.exists("/tmp/skipped.txt")
    assert root.isfile("/home/deploy/roles/webserver/tasks/main.yml")  # the galaxy action ran, as deploy
    assert root.stat("/home/deploy/roles/webserver").st_uid == DEPLOY_UID


# cloud-init 25.2: ansible.pull is a list, each with playbook_names (a single mapping and playbook_name deprecated)
ANSIBLE_PULL_LISTS = [
    {"pull": [{"url": "https://git.example.com/a.git", "playbook_names": ["site.yml", "web.yml"], "checkout": "v2"},
              {"url": "https://git.example.com/b.git", "playbook_name": "db.yml", "diff": True}]},
    {"pull": {"url": "https://git.example.com/c.git", "playbook_names": ["one.yml", "two.yml"],
              "accept_host_key": True}},
]


@pytest.mark.reference
@pytest.mark.parametrize("core", ["2.14.18", "2.10.17"])
@pytest.mark.parametrize("document", ANSIBLE_PULL_LISTS, ids=range(len(ANSIBLE_PULL_LISTS)))
def test_pull_lists_run_as_cloud_init_26_runs_them(shell_target, tmp_path, document, core):
    """Several playbooks go in one ansible-pull from Ansible 2.12 on, one run each before (as 26.x)."""
    from tests.agent.modules.cm_support import reference_run
    from tests.reference import NEW

    cfg = dict(document, install_method="distro", package_name="ansible-core")
    _, ref_commands = reference_run(tmp_path, "ansible", {"ansible": cfg}, oracle=NEW, installed=True,
                                    stdout={"--version": f"ansible-pull [core {core}]"})
    root = shell_target
    recorder(root, "ansible-pull", f'[ "$1" = --version ] && echo "ansible-pull [core {core}]"')
    result, _ = run(root, "ansible", {"ansible": cfg}, stage="final")
    assert result.status == "ok", result.reason
    theirs = [" ".join(c) for c in ref_commands if c != ["ansible-pull", "--version"]]
    assert [c for c in calls(root) if c != "ansible-pull --version"] == theirs
    # the playbooks together from 2.12 on, one run each before
    pulls = document["pull"] if isinstance(document["pull"], list) else [document["pull"]]
    books = [len(p.get("playbook_names") or [p.get("playbook_name")]) for p in pulls]
    assert len(theirs) == (len(pulls) if core.startswith("2.14") else sum(books))
