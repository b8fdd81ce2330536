"""timezone: set the system timezone (``/etc/localtime`` link; ``/etc/timezone`` on Debian).

The name must be a zone of the target's zoneinfo database; an unknown name is reported with the
key and nothing is changed.
"""

from __future__ import annotations

from cloudseed.agent.distros import DistroError
from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec

MODULE = ModuleSpec(
    name="timezone", stage=STAGE_CONFIG, activate_by=("timezone",),
    title="Set the system timezone",
    schema={"properties": {"timezone": {"type": "string", "description": "A zone name such as Europe/Paris."}}},
    examples=(
        """\
#cloud-config
timezone: America/Sao_Paulo
""",
    ),
)


def handle(ctx: ModuleContext) -> None:
    zone = ctx.cfg.get("timezone")
    if not isinstance(zone, str):
        raise ModuleError(f"timezone: expected a zone name such as 'Europe/Paris', got {type(zone).__name__}")
    try:
        ctx.distro.set_timezone(zone.strip())
    except DistroError as e:
        raise ModuleError(f"timezone: {e}") from None
    ctx.log.info("timezone set to %s", zone.strip())
