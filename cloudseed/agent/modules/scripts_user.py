"""scripts_user: run the user-data scripts and the runcmd script of this instance (final stage)."""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.scripts import ScriptFailures, run_parts

MODULE = ModuleSpec(name="scripts_user", stage=STAGE_FINAL, title="Run user-data scripts and runcmd")


def handle(ctx: ModuleContext) -> None:
    try:
        run_parts(ctx.root, f"{ctx.instance_dir}/scripts", env={"INSTANCE_ID": ctx.instance_id})
    except ScriptFailures as e:
        raise ModuleError(str(e)) from None
