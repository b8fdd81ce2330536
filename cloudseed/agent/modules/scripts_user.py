"""scripts_user: run the user-data scripts and the runcmd script of this instance (final stage).

Like every script module it honours cloudbase-init's exit codes (1001 reboot now, 1002 run again at
the next boot, 1003 both; ``cloudseed/agent/modules/_script_exits.py``); it declares their settings,
``script_exit_codes``.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleSpec
from cloudseed.agent.modules._script_dirs import run_dirs
from cloudseed.agent.modules._script_exits import SCHEMA

MODULE = ModuleSpec(
    name="scripts_user", stage=STAGE_FINAL, title="Run user-data scripts and runcmd",
    schema={"properties": {"script_exit_codes": SCHEMA}},
    examples=(
        """\
#cloud-config
# Install a kernel, then reboot into it before the rest of the boot goes on (cloudbase-init's
# exit code 1001: reboot now, do not run again; the shell sees 1001 as 233). A script that keeps
# asking to run again (1002/1003) is stopped after two re-runs in a row.
script_exit_codes:
  max_reruns: 2
runcmd:
  - touch /var/tmp/kernel-installed
  - exit 1001
""",
        """\
#cloud-config
# Exit codes 233-235 are ordinary failures for these scripts.
script_exit_codes:
  enabled: false
""",
    ),
)


def handle(ctx: ModuleContext) -> None:
    run_dirs(ctx, [f"{ctx.instance_dir}/scripts"])
    if ctx.cfg.get("runcmd") and not ctx.again and not ctx.root.exists(f"{ctx.instance_dir}/scripts/runcmd"):
        # the runcmd module could not put its script in place (a full disk): this module is not done
        # until it has run it (the scripts it ran are recorded: they do not run again)
        ctx.again = "runs again at the next boot: runcmd's script is not in place (the runcmd module failed)"
