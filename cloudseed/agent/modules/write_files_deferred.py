"""write_files_deferred: the ``write_files`` entries marked ``defer: true``, in the final stage."""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleSpec
from cloudseed.agent.modules.write_files import write_entries

MODULE = ModuleSpec(
    name="write_files_deferred", stage=STAGE_FINAL, activate_by=("write_files",),
    title="Write the files marked defer: true, after users exist",
    examples=(
        """\
#cloud-config
# defer: the file is written in the final stage, once the user it belongs to exists.
users:
  - default
  - name: alice
write_files:
  - path: /home/alice/.config/app.toml
    owner: alice:alice
    permissions: "0600"
    defer: true
    content: |
      token_file = "/run/app/token"
""",
    ),
)


def handle(ctx: ModuleContext) -> None:
    write_entries(ctx, ctx.cfg.get("write_files") or [], deferred=True)
