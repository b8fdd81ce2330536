"""disable_ec2_metadata: block the metadata service addresses for the rest of the boot.

With ``disable_ec2_metadata: true`` a ``prohibit`` route is set to every cloud's metadata address
(169.254.169.254, Scaleway's, AliYun's, the IPv6 ones: ``metadata_access.METADATA_ADDRESSES``,
and the one the datasource used) with ``ip route replace`` (running it twice is harmless), or the
IPv4 ones with ``route`` where ``ip`` is missing, after the agent has read what it needs. cloud-init
blocks 169.254.169.254 only. Routes do not survive a reboot, so the module runs at every boot; on a
root that is not the running system there is no routing table to change and it says so.
(``metadata_access: root-only`` keeps the service for root instead.)
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules.metadata_access import addresses
from cloudseed.agent.state import PER_BOOT
from cloudseed.core.root import CommandError
from cloudseed.core.values import as_bool

METADATA_ADDRESS = "169.254.169.254"

MODULE = ModuleSpec(
    name="disable_ec2_metadata", stage=STAGE_CONFIG, frequency=PER_BOOT, activate_by=("disable_ec2_metadata",),
    title="Block the metadata service address after the agent has used it",
    schema={"properties": {"disable_ec2_metadata": {
        "type": "boolean", "default": False,
        "description": f"Set a prohibit route to {METADATA_ADDRESS} and every other cloud's metadata "
                       "address at every boot.",
    }}},
    examples=(
        """\
#cloud-config
disable_ec2_metadata: true
""",
    ),
)


def block_commands(ctx: ModuleContext) -> list[list[str]]:
    targets = addresses(ctx)
    if ctx.root.which("ip"):
        return [["ip", *(["-6"] if ":" in a else []), "route", "replace", "prohibit", a] for a in targets]
    if ctx.root.which("route"):
        return [["route", "add", "-host", a, "reject"] for a in targets if ":" not in a]
    raise ModuleError("disable_ec2_metadata: neither 'ip' nor 'route' is installed")


def handle(ctx: ModuleContext) -> None:
    if not as_bool(ctx.cfg.get("disable_ec2_metadata")):
        ctx.log.info("metadata address left reachable (disable_ec2_metadata is false)")
        return
    commands = block_commands(ctx)
    if not ctx.root.is_live:
        ctx.log.info("not setting a route: %s is not the running system (the route is set at each boot)",
                     ctx.root.top)
        return
    failed = []
    for argv in commands:
        try:
            ctx.root.run(argv)
        except CommandError as e:   # an IPv6 route where IPv6 is off: the others still count
            failed.append(f"{argv[-1]}: {e}")
    if len(failed) == len(commands) or any(METADATA_ADDRESS in f for f in failed):
        raise ModuleError("disable_ec2_metadata: " + "; ".join(failed))
    for problem in failed:
        ctx.warn(f"disable_ec2_metadata: {problem}")
    ctx.log.info("metadata addresses blocked: %s", ", ".join(argv[-1] for argv in commands))
