"""runcmd: turn the ``runcmd`` list into a script that ``scripts_user`` runs in the final stage."""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules.bootcmd import _COMMAND_LIST
from cloudseed.agent.scripts import commands_to_script

MODULE = ModuleSpec(
    name="runcmd",
    stage=STAGE_CONFIG,
    activate_by=("runcmd",),
    title="Run commands late in the first boot (through scripts_user)",
    schema={"properties": {"runcmd": {**_COMMAND_LIST, "minItems": 1}}},
    examples=(
        """\
#cloud-config
# Once per instance, late in the boot (after users, files and packages).
runcmd:
  - [systemctl, enable, --now, nginx.service]
  - echo "provisioned on $(date -u)" > /etc/motd
""",
    ),
)


def handle(ctx: ModuleContext) -> None:
    try:
        script = commands_to_script(ctx.cfg["runcmd"], "runcmd")
    except ValueError as e:
        raise ModuleError(str(e)) from None
    ctx.root.write(f"{ctx.instance_dir}/scripts/runcmd", script, mode=0o700)
