"""ssh_import_id with the real sudo and users of a debootstrapped Debian root.

ssh-import-id itself would fetch keys from Launchpad or GitHub, which these tests may not reach;
a real executable script stands in for it inside the chroot: it records who ran it (user, HOME)
and with which ids, and appends a key to that user's authorized_keys as the real tool does.
"""

from __future__ import annotations

from tests.agent.modules.module_support import run

FAKE_TOOL = """#!/bin/sh
# stands in for ssh-import-id: records the user, HOME and ids; writes one key per id
echo "$(id -un) $HOME $*" >> /tmp/ssh-import-id.log
mkdir -p "$HOME/.ssh"
for id in "$@"; do echo "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyFor$id $id" >> "$HOME/.ssh/authorized_keys"; done
case "$*" in *gh:nobody-here*) echo "ERROR Username not found at URL" >&2; exit 1;; esac
"""


def test_default_and_other_users_through_sudo(debian_root):
    root = debian_root
    root.run(["useradd", "-m", "-s", "/bin/bash", "debian"])
    root.run(["useradd", "-m", "-s", "/bin/bash", "ops"])
    root.write("/usr/local/bin/ssh-import-id", FAKE_TOOL, mode=0o755)
    root.write("/tmp/ssh-import-id.log", "", mode=0o666)
    cfg = {"ssh_import_id": ["gh:alice", "lp:bob"],
           "users": ["default", {"name": "ops", "ssh_import_id": ["gh:carol"]},
                     {"name": "ghost", "ssh_import_id": ["gh:dave"]},
                     {"name": "ops2-nothing"}]}
    result, _ = run(root, "ssh_import_id", cfg)
    assert result.status == "failed"
    assert result.reason == "users[2].ssh_import_id: user ghost does not exist"
    assert root.read_text("/tmp/ssh-import-id.log").splitlines() == [
        "debian /home/debian gh:alice lp:bob", "ops /home/ops gh:carol"]
    keys = root.read_text("/home/debian/.ssh/authorized_keys")
    assert "gh:alice" in keys and "lp:bob" in keys
    assert root.stat("/home/ops/.ssh/authorized_keys").st_uid == int(root.user_entry("ops")[2])


def test_tool_failure_is_named(debian_root):
    root = debian_root
    root.run(["useradd", "-m", "ops"])
    root.write("/usr/local/bin/ssh-import-id", FAKE_TOOL, mode=0o755)
    root.write("/tmp/ssh-import-id.log", "", mode=0o666)
    result, _ = run(root, "ssh_import_id", {"users": [{"name": "ops", "ssh_import_id": "gh:nobody-here"}]})
    assert result.status == "failed"
    assert result.reason == ("users[0].ssh_import_id: ssh-import-id failed for ops: "
                             "ERROR Username not found at URL")


def test_missing_tool_names_it(target):
    with open(target.path("/etc/passwd"), "a") as handle:
        handle.write("debian:x:1000:1000::/home/debian:/bin/bash\n")
    result, _ = run(target, "ssh_import_id", {"ssh_import_id": ["gh:alice"], "users": ["default"]})
    assert result.status == "failed"
    assert result.reason == ("ssh_import_id: ssh-import-id is not installed on the target (the ssh-import-id "
                             "package); keys not imported for: debian")


def test_nothing_to_import_is_quiet(target):
    result, _ = run(target, "ssh_import_id", {"users": ["default", {"name": "ops"}]})
    assert result.status == "ok"
