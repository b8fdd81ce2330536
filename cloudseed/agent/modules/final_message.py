"""final_message: print the end-of-boot message to the console and mark the boot finished.

The message may use ``$UPTIME``, ``$TIMESTAMP``, ``$DATASOURCE``, ``$VERSION`` (any case, also
``${...}`` and ``{{ ... }}``). ``boot-finished`` in the instance directory records when.
"""

from __future__ import annotations

import re
import time

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleSpec
from cloudseed.agent.state import PER_BOOT, uptime_seconds

DEFAULT_MESSAGE = "cloudseed: finished at $TIMESTAMP, datasource $DATASOURCE, up $UPTIME seconds"

MODULE = ModuleSpec(
    name="final_message", stage=STAGE_FINAL, frequency=PER_BOOT,
    title="Print the final message",
    schema={"properties": {"final_message": {"type": "string"}}},
    examples=(
        """\
#cloud-config
# $UPTIME, $TIMESTAMP, $DATASOURCE and $VERSION are filled in when the message is printed.
final_message: |
  Instance ready after $UPTIME seconds (datasource $DATASOURCE, cloudseed $VERSION).
""",
    ),
)

_VARIABLE = re.compile(r"\$\{?([A-Za-z_]+)\}?|\{\{\s*([A-Za-z_]+)\s*\}\}")


def render_message(template: str, values: dict[str, str]) -> str:
    def replace(match: re.Match) -> str:
        key = (match.group(1) or match.group(2)).lower()
        return values.get(key, match.group(0))

    return _VARIABLE.sub(replace, template)


def handle(ctx: ModuleContext) -> None:
    from cloudseed import __version__

    uptime = uptime_seconds()
    values = {
        "uptime": f"{uptime:.2f}" if uptime is not None else "unknown",
        "timestamp": time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime()),
        "datasource": ctx.datasource.name if ctx.datasource is not None else "none",
        "version": __version__,
    }
    template = ctx.cfg.get("final_message") or DEFAULT_MESSAGE
    message = render_message(str(template), values)
    ctx.console(message)
    ctx.log.info("%s", message)
    ctx.root.write(f"{ctx.instance_dir}/boot-finished",
                   f"{values['uptime']} - {values['timestamp']} - v. {__version__}\n")
