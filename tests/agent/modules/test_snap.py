"""snap: assertions acknowledged and commands run through the target's ``snap`` command.

snapd cannot run in a chroot (it needs a running systemd and the snap store), so these tests put a
real executable script in a chroot (busybox sh) standing in for ``snap``: it records its argv and
the assertions file it was asked to ack, and fails like snap does for an unknown snap.
"""

from __future__ import annotations

from cloudseed.agent.config.schema import validate_config
from tests.agent.modules.module_support import run

FAKE_SNAP = """#!/bin/sh
# stands in for snap: records argv; "ack FILE" copies FILE; "install nosuch" fails as snap does
echo "snap $*" >> /var/log/snap-argv
if [ "$1" = ack ]; then cat "$2" > /var/log/snap-acked; fi
if [ "$1 $2" = "install nosuch" ]; then echo 'error: snap "nosuch" not found' >&2; exit 1; fi
exit 0
"""

ASSERTION_A = "type: account-key\nauthority-id: canonical\n"
ASSERTION_B = "type: model\nauthority-id: example\n"


def _with_snap(root):
    root.write("/usr/bin/snap", FAKE_SNAP, mode=0o755)
    root.makedirs("/var/log")
    return root


def test_assertions_then_commands_in_order(shell_target):
    root = _with_snap(shell_target)
    cfg = {"snap": {"assertions": {"01": ASSERTION_A, "00": ASSERTION_B},
                    "commands": {"02": "snap install --classic certbot", "00": ["install", "hello-world"],
                                 "01": [None, "snap", "refresh"], "03": ["snap", "list"]}}}
    result, ctx = run(root, "snap", cfg)
    assert result.status == "ok", result.reason
    assert root.read_text("/var/log/snap-argv").splitlines() == [
        f"snap ack {ctx.instance_dir}/snapd.assertions",
        "snap install hello-world", "snap refresh", "snap install --classic certbot", "snap list"]
    # mapping values in the order given, joined by newlines
    assert root.read_text("/var/log/snap-acked") == ASSERTION_A + "\n" + ASSERTION_B
    assert "snap install hello-world" in root.read_text("/var/log/cloudseed-output.log")


def test_failing_command_is_named_and_the_others_run(shell_target):
    root = _with_snap(shell_target)
    result, _ = run(root, "snap", {"snap": {"commands": [["install", "nosuch"], ["install", "jq"]]}})
    assert result.status == "failed"
    assert result.reason == 'snap.commands[0] (snap install nosuch): error: snap "nosuch" not found'
    assert root.read_text("/var/log/snap-argv").splitlines() == ["snap install nosuch", "snap install jq"]


def test_without_snap_a_clear_error(target):
    result, _ = run(target, "snap", {"snap": {"assertions": [ASSERTION_A], "commands": [["install", "jq"]]}})
    assert result.status == "failed"
    assert result.reason == ("snap: the snap command is not installed on the target (snapd); "
                             "1 assertion(s) and 1 command(s) not run")


def test_bad_items_and_schema(target):
    result, _ = run(target, "snap", {"snap": {"commands": [42]}})
    assert result.status == "failed"
    assert result.reason == "snap.commands[0]: expected a shell line or a non-empty list of arguments"
    assert validate_config({"snap": {"commands": ["snap install jq"], "assertions": ["x"]}}, "") == []
    assert validate_config({"snap": {"command": ["snap install jq"]}}, "")  # typo: an error
    assert validate_config({"snap": {}}, "")
