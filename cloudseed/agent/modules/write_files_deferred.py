"""write_files_deferred: the ``write_files`` entries marked ``defer: true``, in the final stage."""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleSpec
from cloudseed.agent.modules.write_files import write_entries

MODULE = ModuleSpec(name="write_files_deferred", stage=STAGE_FINAL, activate_by=("write_files",),
                    title="Write the files marked defer: true, after users exist")


def handle(ctx: ModuleContext) -> None:
    write_entries(ctx, ctx.cfg.get("write_files") or [], deferred=True)
