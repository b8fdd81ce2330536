"""scripts_per_instance: run the scripts in ``scripts/per-instance`` once per instance (ours and cloud-init's)."""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleSpec
from cloudseed.agent.modules._script_dirs import run_frequency_dirs
from cloudseed.agent.state import PER_INSTANCE

MODULE = ModuleSpec(name="scripts_per_instance", stage=STAGE_FINAL, frequency=PER_INSTANCE,
                    title="Run scripts in the per-instance directories")


def handle(ctx: ModuleContext) -> None:
    run_frequency_dirs(ctx, PER_INSTANCE)
