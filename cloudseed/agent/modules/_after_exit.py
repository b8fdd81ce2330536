"""Running a command once this agent process has exited: the shutdown or reboot a stage asks for.

Shared by ``power_state_change`` (``power_state:``) and ``_script_exits`` (a user script's exit
code asking for a reboot): a detached shell waits for the agent to end, checks a condition, then
runs the command.
"""

from __future__ import annotations

import os
import shlex

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from cloudseed.agent.modules import ModuleContext


def schedule(ctx: ModuleContext, argv: list[str], condition: str = "true", timeout: int = 30) -> None:
    """Run ``argv`` once this agent process has exited (at most ``timeout`` s) and ``condition`` holds.

    On a root other than the running system nothing runs: what would run is logged.
    """
    if not ctx.root.is_live:
        ctx.log.info("offline root: would run %s (condition: %s)", shlex.join(argv), condition)
        return
    waiter = (
        f"pid={os.getpid()}; i=0; while kill -0 \"$pid\" 2>/dev/null && [ $i -lt {timeout} ]; do "
        f"sleep 1; i=$((i+1)); done; if ( {condition} ); then exec {shlex.join(argv)}; fi"
    )
    ctx.root.spawn(["/bin/sh", "-c", waiter])
    ctx.log.info("will run %s once the agent has exited", shlex.join(argv))
