"""runcmd: the list becomes the instance's runcmd script, which scripts_user runs in the final stage."""

from __future__ import annotations

import os
import stat

from tests.agent.modules.module_support import run


def test_runcmd_writes_a_script_that_scripts_user_runs(shell_target):
    cfg = {"runcmd": ['echo "ran for $INSTANCE_ID" > /tmp/runcmd.out', ["mkdir", "-p", "/srv/app data"]]}
    result, ctx = run(shell_target, "runcmd", cfg)
    assert result.status == "ok", result.reason
    script = f"{ctx.instance_dir}/scripts/runcmd"
    assert stat.S_IMODE(os.stat(shell_target.path(script)).st_mode) == 0o700
    assert shell_target.read_text(script) == \
        '#!/bin/sh\necho "ran for $INSTANCE_ID" > /tmp/runcmd.out\nmkdir -p \'/srv/app data\'\n'
    assert not shell_target.exists("/tmp/runcmd.out")  # written now, run by scripts_user later
    result, _ = run(shell_target, "scripts_user", cfg, stage="final")
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/tmp/runcmd.out") == "ran for i-test\n"
    assert shell_target.isdir("/srv/app data")


def test_a_bad_entry_is_named_and_no_script_is_written(target):
    result, ctx = run(target, "runcmd", {"runcmd": ["true", ["echo", {"x": 1}]]})
    assert result.status == "failed" and result.reason == "runcmd[1]: argv items must be strings"
    assert not target.exists(f"{ctx.instance_dir}/scripts/runcmd")
