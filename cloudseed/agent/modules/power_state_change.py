"""power_state_change: power off, halt or reboot once the agent has finished.

A detached helper waits for this agent process to exit (at most ``timeout`` seconds), checks
``condition``, then runs ``shutdown``. On a root other than the running system nothing is
powered off: the command that would run is logged instead.
"""

from __future__ import annotations

import shlex

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._after_exit import schedule

MODES = {"poweroff": "-P", "halt": "-H", "reboot": "-r"}

MODULE = ModuleSpec(
    name="power_state_change", stage=STAGE_FINAL, activate_by=("power_state",),
    title="Change the power state after boot",
    schema={"properties": {"power_state": {
        "type": "object",
        "required": ["mode"],
        "properties": {
            "mode": {"type": "string", "enum": list(MODES)},
            "delay": {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "string", "enum": ["now"]},
                                {"type": "string", "pattern": r"^\+?[0-9]+$", "deprecated": True,
                                 "deprecated_version": "22.3", "deprecated_description": "Use now or an integer."}]},
            "message": {"type": "string"},
            "timeout": {"type": "integer", "minimum": 0},
            "condition": {"type": ["string", "boolean", "array"]},
        },
        "additionalProperties": False,
    }}},
    examples=(
        """\
#cloud-config
# Reboot five minutes after the agent has finished, with a message to logged-in users.
power_state:
  mode: reboot
  delay: "+5"
  message: Rebooting to start the new kernel
""",
        """\
#cloud-config
# Power off at once, but only when /run/app/done exists; wait at most a minute for the agent to exit.
power_state:
  mode: poweroff
  delay: now
  timeout: 60
  condition: test -f /run/app/done
""",
    ),
)


def shutdown_command(settings: dict) -> list[str]:
    mode = settings.get("mode")
    if mode not in MODES:
        raise ModuleError(f"power_state.mode: {mode!r} is not one of {', '.join(MODES)}")
    delay = settings.get("delay", "now")
    text = str(delay).strip()
    if text != "now":
        digits = text.lstrip("+")
        if not digits.isdigit():
            raise ModuleError(f"power_state.delay: {delay!r} is not 'now' or a number of minutes")
        text = f"+{digits}"
    argv = ["shutdown", MODES[mode], text]
    if settings.get("message"):
        argv.append(str(settings["message"]))
    return argv


def condition_script(condition) -> str:
    if condition is None or condition is True:
        return "true"
    if condition is False:
        return "false"
    if isinstance(condition, list):
        return shlex.join(str(c) for c in condition)
    return str(condition)


def handle(ctx: ModuleContext) -> None:
    settings = ctx.cfg.get("power_state")
    if not isinstance(settings, dict):
        raise ModuleError("power_state: expected a mapping with a mode")
    argv = shutdown_command(settings)
    try:
        timeout = int(settings.get("timeout", 30))
    except (TypeError, ValueError):
        raise ModuleError("power_state.timeout: expected a number of seconds") from None
    schedule(ctx, argv, condition_script(settings.get("condition", True)), timeout)
