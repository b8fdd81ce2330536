"""scripts_vendor: the instance's vendor-data scripts run unless vendor_data.enabled is false."""

from __future__ import annotations

import pytest

from tests.agent.modules.module_support import run

VENDOR = "/var/lib/cloudseed/instances/i-test/scripts/vendor"


def test_vendor_scripts_run(shell_target):
    shell_target.write(f"{VENDOR}/setup", '#!/bin/sh\necho "vendor $INSTANCE_ID" > /tmp/vendor.out\n', mode=0o700)
    result, _ = run(shell_target, "scripts_vendor", {}, stage="final")
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/tmp/vendor.out") == "vendor i-test\n"


@pytest.mark.parametrize("enabled", [False, "false", "no"])
def test_switched_off_nothing_runs(shell_target, enabled):
    shell_target.write(f"{VENDOR}/setup", "#!/bin/sh\ntouch /tmp/vendor.out\n", mode=0o700)
    result, _ = run(shell_target, "scripts_vendor", {"vendor_data": {"enabled": enabled}}, stage="final")
    assert result.status == "ok", result.reason
    assert not shell_target.exists("/tmp/vendor.out")


def test_a_failing_vendor_script_is_reported(shell_target):
    shell_target.write(f"{VENDOR}/broken", "#!/bin/sh\nexit 2\n", mode=0o700)
    result, _ = run(shell_target, "scripts_vendor", {}, stage="final")
    assert result.status == "failed" and result.reason == f"1 of 1 scripts failed: {VENDOR}/broken (exit 2)"
