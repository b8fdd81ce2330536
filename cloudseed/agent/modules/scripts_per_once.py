"""scripts_per_once: run the scripts in ``scripts/per-once`` (once ever; cloud-init's directory too)."""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleSpec
from cloudseed.agent.modules._script_dirs import run_frequency_dirs
from cloudseed.agent.state import PER_ONCE

MODULE = ModuleSpec(name="scripts_per_once", stage=STAGE_FINAL, frequency=PER_ONCE,
                    title="Run scripts in the per-once directories")


def handle(ctx: ModuleContext) -> None:
    run_frequency_dirs(ctx, PER_ONCE)
