"""Shared body of the scripts_per_* modules: run the script directories of one frequency."""

from __future__ import annotations

from cloudseed.agent.modules import ModuleContext, ModuleError
from cloudseed.agent.scripts import ScriptFailures, run_parts
from cloudseed.agent.state import SCRIPT_DIRS


def run_frequency_dirs(ctx: ModuleContext, frequency: str) -> None:
    failures = []
    for directory in SCRIPT_DIRS[frequency]:
        try:
            run_parts(ctx.root, directory, env={"INSTANCE_ID": ctx.instance_id})
        except ScriptFailures as e:
            failures.append(str(e))
    if failures:
        raise ModuleError("; ".join(failures))
