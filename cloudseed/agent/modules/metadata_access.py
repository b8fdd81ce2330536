"""metadata_access: once provisioning is done, only root may reach the link-local metadata service.

On every cloud any process of the instance can read the user-data (and its secrets) and the
credentials from the metadata address after boot. ``metadata_access: root-only`` adds, at every
boot in the final stage, a packet filter rule on the machine's output path: a connection to one of
the clouds' metadata addresses from a process whose user is not root is rejected (nftables'
``meta skuid``, iptables' ``owner`` match where nft is missing: what AWS recommends for IMDS).
``open`` (the default) removes the rule again. The addresses are every cloud's
(``METADATA_ADDRESSES``) and the one the datasource used. ``disable_ec2_metadata`` blocks them
for everyone. On a root other than the running system nothing is changed.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.state import PER_BOOT
from cloudseed.core.root import CommandError

# every cloud's metadata addresses: EC2/OpenStack/GCE/Azure/DigitalOcean/Hetzner/Oracle/...,
# Scaleway, AliYun, EC2's IPv6, Akamai's IPv6
METADATA_ADDRESSES = ("169.254.169.254", "169.254.42.42", "100.100.100.200", "fd00:ec2::254", "fd00:a9fe:a9fe::1")
TABLE = "cloudseed_metadata"
CHAIN = "CLOUDSEED-METADATA"  # iptables
MODES = ("open", "root-only")

MODULE = ModuleSpec(
    name="metadata_access", stage=STAGE_FINAL, frequency=PER_BOOT, activate_by=("metadata_access",),
    title="Let only root reach the metadata service once provisioning is done",
    schema={"properties": {"metadata_access": {
        "type": "string", "enum": list(MODES), "default": "open",
        "description": "root-only: connections to the clouds' metadata addresses from other users are "
                       "rejected from the end of each boot (nftables or iptables owner match).",
    }}},
    examples=(
        """\
#cloud-config
# Processes of other users cannot read user-data or credentials from the metadata service.
metadata_access: root-only
""",
    ),
)


def addresses(ctx: ModuleContext) -> list[str]:
    """Every cloud's metadata addresses and the datasource's own (when it used another one)."""
    import ipaddress

    found = list(METADATA_ADDRESSES)
    used = str(getattr(ctx.datasource, "metadata_address", "") or "")
    host = used.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]") if used else ""
    try:
        if host and str(ipaddress.ip_address(host)) not in found:
            found.append(str(ipaddress.ip_address(host)))
    except ValueError:
        pass
    return found


def nft_script(wanted: bool, targets: list[str]) -> str:
    """The nftables script that (re)creates our table with the rule, or only removes it."""
    lines = [f"table inet {TABLE}", f"delete table inet {TABLE}"]
    if wanted:
        v4 = ", ".join(a for a in targets if ":" not in a)
        v6 = ", ".join(a for a in targets if ":" in a)
        lines += [f"table inet {TABLE} {{", "  chain output {",
                  "    type filter hook output priority 0; policy accept;"]
        if v4:
            lines.append(f"    ip daddr {{ {v4} }} meta skuid != 0 reject with icmpx type admin-prohibited")
        if v6:
            lines.append(f"    ip6 daddr {{ {v6} }} meta skuid != 0 reject with icmpx type admin-prohibited")
        lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def _iptables(ctx: ModuleContext, wanted: bool, targets: list[str]) -> None:
    for tool, family in (("iptables", [a for a in targets if ":" not in a]),
                         ("ip6tables", [a for a in targets if ":" in a])):
        if not family or not ctx.root.which(tool):
            continue
        ctx.root.run([tool, "-w", "-D", "OUTPUT", "-j", CHAIN], check=False)
        ctx.root.run([tool, "-w", "-F", CHAIN], check=False)
        ctx.root.run([tool, "-w", "-X", CHAIN], check=False)
        if not wanted:
            continue
        ctx.root.run([tool, "-w", "-N", CHAIN])
        for address in family:
            ctx.root.run([tool, "-w", "-A", CHAIN, "-d", address, "-m", "owner", "!", "--uid-owner", "0",
                          "-j", "REJECT"])
        ctx.root.run([tool, "-w", "-I", "OUTPUT", "1", "-j", CHAIN])


def handle(ctx: ModuleContext) -> None:
    mode = ctx.cfg.get("metadata_access", "open")
    if mode not in MODES:
        raise ModuleError(f"metadata_access: {mode!r} is not one of {', '.join(MODES)}")
    wanted = mode == "root-only"
    if not ctx.root.is_live:
        ctx.log.info("not changing the packet filter: %s is not the running system (done at each boot)", ctx.root.top)
        return
    targets = addresses(ctx)
    try:
        if ctx.root.which("nft"):
            ctx.root.run(["nft", "-f", "-"], input=nft_script(wanted, targets))
        elif ctx.root.which("iptables"):
            _iptables(ctx, wanted, targets)
        elif wanted:
            raise ModuleError("metadata_access: root-only needs nft (nftables) or iptables; neither is installed")
    except CommandError as e:
        raise ModuleError(f"metadata_access: {e}") from None
    ctx.log.info("metadata addresses %s: %s", ", ".join(targets), "root only" if wanted else "open to all")
