"""scripts_per_instance: the per-instance script directories (cloudseed's and cloud-init's) run, chrooted."""

from __future__ import annotations

from cloudseed.agent.state import PER_INSTANCE, SCRIPT_DIRS
from tests.agent.modules.module_support import run


def test_both_directories_run_and_failures_are_named(shell_target):
    ours, cloud_inits = SCRIPT_DIRS[PER_INSTANCE]
    shell_target.write(f"{ours}/10-ours", '#!/bin/sh\necho "ours $INSTANCE_ID" >> /tmp/per-instance\n', mode=0o755)
    shell_target.write(f"{cloud_inits}/20-theirs", "#!/bin/sh\necho theirs >> /tmp/per-instance\n", mode=0o755)
    result, _ = run(shell_target, "scripts_per_instance", {}, stage="final")
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/tmp/per-instance") == "ours i-test\ntheirs\n"
    shell_target.write(f"{cloud_inits}/30-broken", "#!/bin/sh\nexit 4\n", mode=0o755)
    result, _ = run(shell_target, "scripts_per_instance", {}, stage="final")
    assert result.status == "failed" and result.reason == f"1 of 2 scripts failed: {cloud_inits}/30-broken (exit 4)"


def test_the_module_runs_per_instance(target):
    from cloudseed.agent.modules import load_module

    assert load_module("scripts_per_instance")[0].frequency == PER_INSTANCE
    result, _ = run(target, "scripts_per_instance", {}, stage="final")
    assert result.status == "ok" and result.frequency == PER_INSTANCE
