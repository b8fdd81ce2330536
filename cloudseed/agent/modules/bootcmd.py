"""bootcmd: commands run early in every boot (init stage), with INSTANCE_ID in the environment."""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.scripts import commands_to_script, run_script
from cloudseed.agent.state import PER_BOOT
from cloudseed.core.root import CommandError

_COMMAND_LIST = {
    "type": "array",
    "items": {"oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}, {"type": "null"}]},
}

MODULE = ModuleSpec(
    name="bootcmd",
    stage=STAGE_INIT,
    frequency=PER_BOOT,
    activate_by=("bootcmd",),
    title="Run commands early in every boot",
    schema={"properties": {"bootcmd": {**_COMMAND_LIST, "minItems": 1}}},
    examples=(
        """\
#cloud-config
# Every boot, early: a string runs through /bin/sh, a list is a command and its arguments.
bootcmd:
  - echo "$(date -u) booted" >> /var/log/boot-history.log
  - [mkdir, -p, /run/app]
""",
    ),
)


def handle(ctx: ModuleContext) -> None:
    try:
        script = commands_to_script(ctx.cfg["bootcmd"], "bootcmd")
    except ValueError as e:
        raise ModuleError(str(e)) from None
    path = f"{ctx.instance_dir}/bootcmd"
    ctx.root.write(path, script, mode=0o700)
    try:
        run_script(ctx.root, path, env={"INSTANCE_ID": ctx.instance_id})
    except CommandError as e:
        raise ModuleError(f"bootcmd exited {e.returncode}" + (f": {e.stderr.strip()[-200:]}" if e.stderr else ""))
