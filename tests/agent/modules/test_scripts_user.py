"""scripts_user: the instance's user-data scripts run in name order, chrooted, with INSTANCE_ID set."""

from __future__ import annotations

from tests.agent.modules.module_support import run


def script(root, inner: str, body: str, mode: int = 0o700) -> None:
    root.write(inner, "#!/bin/sh\n" + body, mode=mode)


def test_scripts_run_in_name_order_and_a_failure_does_not_stop_the_others(shell_target):
    scripts = "/var/lib/cloudseed/instances/i-test/scripts"
    script(shell_target, f"{scripts}/part-001", 'echo "1 $INSTANCE_ID" >> /tmp/order\n')
    script(shell_target, f"{scripts}/part-002", "echo 2 >> /tmp/order\nexit 5\n")
    script(shell_target, f"{scripts}/part-003", "echo 3 >> /tmp/order\n")
    script(shell_target, f"{scripts}/notes.txt", "echo never >> /tmp/order\n", mode=0o600)  # not executable
    result, _ = run(shell_target, "scripts_user", {}, stage="final")
    assert shell_target.read_text("/tmp/order") == "1 i-test\n2\n3\n"
    assert result.status == "failed"
    assert result.reason == f"1 of 3 scripts failed: {scripts}/part-002 (exit 5)"


def test_no_scripts_is_fine(target):
    result, _ = run(target, "scripts_user", {}, stage="final")
    assert result.status == "ok", result.reason
