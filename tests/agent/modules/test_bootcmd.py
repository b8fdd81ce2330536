"""bootcmd: the list becomes a script run chrooted in the root at every boot, with INSTANCE_ID set."""

from __future__ import annotations

import os
import stat

from tests.agent.modules.module_support import run


def test_strings_and_argv_lists_run_in_the_root(shell_target):
    cfg = {"bootcmd": ['echo "$INSTANCE_ID" > /tmp/iid', ["touch", "/tmp/from a list"], None]}
    result, ctx = run(shell_target, "bootcmd", cfg, stage="init")
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/tmp/iid") == "i-test\n"
    assert shell_target.exists("/tmp/from a list")
    script = f"{ctx.instance_dir}/bootcmd"
    assert stat.S_IMODE(os.stat(shell_target.path(script)).st_mode) == 0o700
    assert shell_target.read_text(script).startswith("#!/bin/sh\n")


def test_a_failing_command_fails_the_module_with_its_exit_status(shell_target):
    result, _ = run(shell_target, "bootcmd", {"bootcmd": ["echo before > /tmp/before", "exit 3"]}, stage="init")
    assert result.status == "failed" and result.reason.startswith("bootcmd exited 3")
    assert shell_target.read_text("/tmp/before") == "before\n"


def test_a_bad_entry_is_named_and_nothing_runs(shell_target):
    result, _ = run(shell_target, "bootcmd", {"bootcmd": ["touch /tmp/ran", {"not": "a command"}]}, stage="init")
    assert result.status == "failed" and result.reason == "bootcmd[1]: expected a string or a list, got dict"
    assert not shell_target.exists("/tmp/ran")


def test_not_configured_is_skipped(target):
    result, _ = run(target, "bootcmd", {}, stage="init")
    assert result.status == "skipped" and result.reason == "no configuration for it"
