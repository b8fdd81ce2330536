"""scripts_per_boot: run the scripts in ``scripts/per-boot`` (every boot; cloud-init's directory too)."""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleSpec
from cloudseed.agent.modules._script_dirs import run_frequency_dirs
from cloudseed.agent.state import PER_BOOT

MODULE = ModuleSpec(name="scripts_per_boot", stage=STAGE_FINAL, frequency=PER_BOOT,
                    title="Run scripts in the per-boot directories")


def handle(ctx: ModuleContext) -> None:
    run_frequency_dirs(ctx, PER_BOOT)
