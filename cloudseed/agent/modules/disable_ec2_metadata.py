"""disable_ec2_metadata: block the instance metadata address 169.254.169.254 for the rest of the boot.

With ``disable_ec2_metadata: true`` a ``prohibit`` route to the address is set (``ip route
replace``, so running it twice is harmless), or with ``route`` where ``ip`` is missing, after the
agent has read what it needs. Routes do not survive a reboot, so the module runs at every boot;
on a root that is not the running system there is no routing table to change and it says so.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.state import PER_BOOT
from cloudseed.core.root import CommandError
from cloudseed.core.values import as_bool

METADATA_ADDRESS = "169.254.169.254"

MODULE = ModuleSpec(
    name="disable_ec2_metadata", stage=STAGE_CONFIG, frequency=PER_BOOT, activate_by=("disable_ec2_metadata",),
    title="Block the metadata service address after the agent has used it",
    schema={"properties": {"disable_ec2_metadata": {
        "type": "boolean", "default": False,
        "description": f"Set a prohibit route to {METADATA_ADDRESS} at every boot.",
    }}},
    examples=(
        """\
#cloud-config
disable_ec2_metadata: true
""",
    ),
)


def block_command(ctx: ModuleContext) -> list[str]:
    if ctx.root.which("ip"):
        return ["ip", "route", "replace", "prohibit", METADATA_ADDRESS]
    if ctx.root.which("route"):
        return ["route", "add", "-host", METADATA_ADDRESS, "reject"]
    raise ModuleError("disable_ec2_metadata: neither 'ip' nor 'route' is installed")


def handle(ctx: ModuleContext) -> None:
    if not as_bool(ctx.cfg.get("disable_ec2_metadata")):
        ctx.log.info("metadata address left reachable (disable_ec2_metadata is false)")
        return
    argv = block_command(ctx)
    if not ctx.root.is_live:
        ctx.log.info("not setting a route: %s is not the running system (the route is set at each boot)",
                     ctx.root.top)
        return
    try:
        ctx.root.run(argv)
    except CommandError as e:
        raise ModuleError(f"disable_ec2_metadata: {e}") from None
    ctx.log.info("metadata address %s blocked (%s)", METADATA_ADDRESS, " ".join(argv))
