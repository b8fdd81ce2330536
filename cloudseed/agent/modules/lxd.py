"""lxd: initialise LXD (``lxd: {init, bridge, preseed}``) with its own tools.

- LXD (and the storage tools a backend needs: zfsutils-linux, lvm2, btrfs-progs) is installed
  through the distro's package manager when ``lxd`` is missing, or as the ``lxd`` snap where the
  distro has no package for it; then ``lxd waitready --timeout=300``.
- ``preseed``: the YAML text is given to ``lxd init --preseed`` on stdin; it cannot be combined
  with ``init`` or ``bridge``.
- ``init``: ``lxd init --auto --network-address=... --network-port=... --storage-backend=...
  --storage-create-device=... --storage-create-loop=... --storage-pool=...``. ``trust_password``
  is a secret and never goes on a command line: it is set afterwards by ``lxd init --preseed``
  reading ``config: {core.trust_password: ...}`` on stdin.
- ``bridge``: ``mode: none`` leaves networking alone; ``existing`` attaches the bridge ``name`` to
  the default profile (``lxc network attach-profile NAME default eth0``); ``new`` creates it
  (``lxc network create NAME ipv4.address=A/N ipv4.nat=true ipv4.dhcp.ranges=F-L
  ipv6.address=... dns.domain=... bridge.mtu=...``, ``none`` for a family not given) and
  attaches it. The bridge ``lxd init --auto`` made (lxdbr0) is removed from the profile first,
  as cloud-init does, so the configured one replaces it.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_FINAL, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_BRIDGE = "lxdbr0"
INIT_FLAGS = ("network_address", "network_port", "storage_backend", "storage_create_device",
              "storage_create_loop", "storage_pool")
STORAGE_TOOLS = {"zfs": ("zfs", "zfsutils-linux"), "lvm": ("lvcreate", "lvm2"), "btrfs": ("mkfs.btrfs", "btrfs-progs")}
TIMEOUT = 600


def _t(kind: str, what: str, **extra: Any) -> dict:
    return {"type": kind, "description": what, **extra}


MODULE = ModuleSpec(
    name="lxd", stage=STAGE_FINAL, activate_by=("lxd",),
    title="Initialise LXD",
    schema={"properties": {"lxd": {
        "type": "object", "minProperties": 1, "additionalProperties": False,
        "description": "LXD's first configuration: ``init`` and ``bridge``, or a whole ``preseed``.",
        "properties": {
            "init": {
                "type": "object", "additionalProperties": False,
                "description": "Options of ``lxd init --auto``; not with ``preseed``.",
                "properties": {
                    "network_address": _t("string", "The address LXD listens on for remote clients."),
                    "network_port": _t("integer", "The port LXD listens on."),
                    "storage_backend": _t("string", "The storage backend. Default: ``dir``.",
                                          enum=["zfs", "dir", "lvm", "btrfs"], default="dir"),
                    "storage_create_device": _t("string", "A block device to make the storage pool on."),
                    "storage_create_loop": _t("integer", "The size in GB of a loop file to make the pool on."),
                    "storage_pool": _t("string", "The name of the storage pool to use or make."),
                    "trust_password": _t("string", "The password new remote clients give (secret: never logged "
                                                   "or on a command line)."),
                },
            },
            "bridge": {
                "type": "object", "required": ["mode"], "additionalProperties": False,
                "description": "The network bridge of the default profile; not with ``preseed``.",
                "properties": {
                    "mode": _t("string", "``none``: no bridge; ``existing``: use the bridge ``name``; ``new``: "
                                         "make it.", enum=["none", "existing", "new"]),
                    "name": _t("string", f"The bridge's name. Default: ``{DEFAULT_BRIDGE}``.", default=DEFAULT_BRIDGE),
                    "mtu": _t("integer", "The bridge's MTU; -1 leaves LXD's default.", default=-1, minimum=-1),
                    "ipv4_address": _t("string", "The bridge's IPv4 address (needs ``ipv4_netmask``)."),
                    "ipv4_netmask": _t("integer", "The prefix length of ``ipv4_address``."),
                    "ipv4_dhcp_first": _t("string", "The first address of the DHCP range."),
                    "ipv4_dhcp_last": _t("string", "The last address of the DHCP range."),
                    "ipv4_dhcp_leases": _t("integer", "How many DHCP leases (older LXD only; LXD counts them "
                                                      "from the range)."),
                    "ipv4_nat": _t("boolean", "NAT the bridge's IPv4 traffic. Default: true when an IPv4 address "
                                              "is given."),
                    "ipv6_address": _t("string", "The bridge's IPv6 address (needs ``ipv6_netmask``)."),
                    "ipv6_netmask": _t("integer", "The prefix length of ``ipv6_address``."),
                    "ipv6_nat": _t("boolean", "NAT the bridge's IPv6 traffic. Default: false."),
                    "domain": _t("string", "The DNS domain the bridge's DHCP and DNS serve."),
                },
            },
            "preseed": _t("string", "A whole LXD preseed document (YAML, as ``lxd init --dump`` prints), given "
                                    "to ``lxd init --preseed``; not with ``init`` or ``bridge``."),
        },
    }}},
    examples=(
        """\
#cloud-config
lxd:
  init:
    network_address: 0.0.0.0
    network_port: 8443
    storage_backend: dir
    trust_password: an-example-password
  bridge:
    mode: new
    name: lxdbr1
    mtu: 1500
    ipv4_address: 10.0.8.1
    ipv4_netmask: 24
    ipv4_dhcp_first: 10.0.8.2
    ipv4_dhcp_last: 10.0.8.254
    ipv4_nat: true
    domain: lxd
""",
        """\
#cloud-config
lxd:
  preseed: |
    config:
      core.https_address: 192.168.1.1:9999
    networks:
      - name: lxdbr0
        type: bridge
        config:
          ipv4.address: 10.42.42.1/24
          ipv4.nat: "true"
          ipv6.address: none
    storage_pools:
      - name: default
        driver: dir
    profiles:
      - name: default
        devices:
          root: {path: /, pool: default, type: disk}
          eth0: {name: eth0, network: lxdbr0, type: nic}
""",
    ),
)


def init_command(init: dict) -> list[str]:
    """``lxd init --auto`` with the ``init`` options (never the trust password)."""
    argv = ["lxd", "init", "--auto"]
    for key in INIT_FLAGS:
        value = init.get(key)
        if value not in (None, ""):
            argv.append(f"--{key.replace('_', '-')}={value}")
    return argv


def trust_preseed(password: str) -> str:
    """The preseed document that sets the trust password (given on stdin)."""
    import json

    return f"config:\n  core.trust_password: {json.dumps(password)}\n"


def bridge_commands(bridge: dict) -> tuple[list[str] | None, list[str] | None]:
    """(``lxc network create ...``, ``lxc network attach-profile ...``) for ``bridge``; None when not needed."""
    mode = bridge.get("mode")
    if mode == "none":
        return None, None
    name = bridge.get("name") or DEFAULT_BRIDGE
    attach = ["network", "attach-profile", name, "default", "eth0"]
    if mode == "existing":
        return None, attach
    if mode != "new":
        raise ModuleError(f"lxd.bridge.mode: {mode!r} is not one of none, existing, new")
    create = ["network", "create", name]
    if bridge.get("ipv4_address") and bridge.get("ipv4_netmask") is not None:
        create.append(f"ipv4.address={bridge['ipv4_address']}/{bridge['ipv4_netmask']}")
        if bridge.get("ipv4_nat", True):
            create.append("ipv4.nat=true")
        if bridge.get("ipv4_dhcp_first") and bridge.get("ipv4_dhcp_last"):
            create.append(f"ipv4.dhcp.ranges={bridge['ipv4_dhcp_first']}-{bridge['ipv4_dhcp_last']}")
    else:
        create.append("ipv4.address=none")
    if bridge.get("ipv6_address") and bridge.get("ipv6_netmask") is not None:
        create.append(f"ipv6.address={bridge['ipv6_address']}/{bridge['ipv6_netmask']}")
        if bridge.get("ipv6_nat", False):
            create.append("ipv6.nat=true")
    else:
        create.append("ipv6.address=none")
    if bridge.get("domain"):
        create.append(f"dns.domain={bridge['domain']}")
    mtu = bridge.get("mtu", -1)
    if mtu not in (None, -1):
        create.append(f"bridge.mtu={mtu}")
    return create, attach


def check(cfg: dict) -> None:
    if cfg.get("preseed") and (cfg.get("init") or cfg.get("bridge")):
        raise ModuleError("lxd.preseed: cannot be combined with lxd.init or lxd.bridge (the preseed says it all)")
    bridge = cfg.get("bridge") or {}
    for family in ("ipv4", "ipv6"):
        if bridge.get(f"{family}_address") and bridge.get(f"{family}_netmask") is None:
            raise ModuleError(f"lxd.bridge.{family}_netmask: needed with {family}_address")
    if bridge.get("ipv4_dhcp_first") and not bridge.get("ipv4_dhcp_last") or \
            bridge.get("ipv4_dhcp_last") and not bridge.get("ipv4_dhcp_first"):
        raise ModuleError("lxd.bridge.ipv4_dhcp_first and ipv4_dhcp_last go together")


def storage_drivers(cfg: dict) -> list[str]:
    drivers = []
    init = cfg.get("init") or {}
    if init.get("storage_backend"):
        drivers.append(init["storage_backend"])
    if cfg.get("preseed"):
        import yaml

        from cloudseed.core.yaml_loading import load_yaml  # aliases bounded: preseed is user-data

        try:
            doc = load_yaml(cfg["preseed"])
        except yaml.YAMLError as e:
            raise ModuleError(f"lxd.preseed: not YAML: {str(e).splitlines()[0]}") from None
        if not isinstance(doc, dict):
            raise ModuleError("lxd.preseed: expected a YAML mapping (config, networks, storage_pools, profiles...)")
        for pool in doc.get("storage_pools") or []:
            if isinstance(pool, dict) and pool.get("driver"):
                drivers.append(str(pool["driver"]))
    return drivers


def handle(ctx: ModuleContext) -> None:
    from cloudseed.agent.modules._system_tools import checked

    cfg = checked(ctx, "lxd", MODULE.schema)
    check(cfg)
    drivers = storage_drivers(cfg)
    _install(ctx, drivers)
    tool = Lxd(ctx, str((cfg.get("init") or {}).get("trust_password") or ""))
    tool.run(["lxd", "waitready", "--timeout=300"], "lxd waitready")
    if cfg.get("preseed"):
        tool.run(["lxd", "init", "--preseed"], "lxd init --preseed", stdin=cfg["preseed"])
        ctx.log.info("lxd: initialised from the preseed")
        return
    init = cfg.get("init") or {}
    if init:
        tool.run(init_command(init), "lxd init --auto")
        if init.get("trust_password"):
            tool.run(["lxd", "init", "--preseed"], "lxd.init.trust_password: lxd init --preseed",
                     stdin=trust_preseed(init["trust_password"]))
    bridge = cfg.get("bridge") or {}
    if bridge:
        create, attach = bridge_commands(bridge)
        name = bridge.get("name") or DEFAULT_BRIDGE
        if name == DEFAULT_BRIDGE and init:
            _forget_default_bridge(tool, bool(create), bool(attach))
        if create:
            tool.lxc(create, "lxd.bridge: lxc network create")
        if attach:
            tool.lxc(attach, "lxd.bridge: lxc network attach-profile")
    ctx.log.info("lxd: initialised%s", f" (bridge {bridge.get('mode')})" if bridge else "")


class Lxd:
    """lxd and lxc on the target; the trust password is masked in every message."""

    def __init__(self, ctx: ModuleContext, secret: str):
        self.ctx, self.secret = ctx, secret

    def run(self, argv: list[str], what: str, stdin: str = "", check: bool = True):
        env = {"LC_ALL": "C", "HOME": "/root", "USER": "root",
               "PATH": "/usr/sbin:/usr/bin:/sbin:/bin:/snap/bin"}
        try:
            return self.ctx.root.run(argv, input=stdin, env=env, check=check, timeout=TIMEOUT)
        except CommandError as e:
            lines = [ln.strip() for ln in (e.stderr + "\n" + e.stdout).splitlines() if ln.strip()]
            reason = lines[-1][:200] if lines else f"exit status {e.returncode}"
            if self.secret:
                reason = reason.replace(self.secret, "[trust password]")
            raise ModuleError(f"lxd: {what} failed: {reason}") from None

    def lxc(self, args: list[str], what: str, check: bool = True):
        return self.run(["lxc", *args, "--force-local"], what, check=check)


def _forget_default_bridge(tool: Lxd, create: bool, attach: bool) -> None:
    """Take away what ``lxd init --auto`` made, so the configured bridge replaces it (1: it was not there)."""
    if create:
        proc = tool.lxc(["network", "detach-profile", DEFAULT_BRIDGE, "default"],
                        "lxd.bridge: lxc network detach-profile",
                        check=False)
        if proc.returncode == 0:
            tool.lxc(["network", "delete", DEFAULT_BRIDGE], f"lxd.bridge: lxc network delete {DEFAULT_BRIDGE}")
        elif proc.returncode != 1:
            raise ModuleError(f"lxd.bridge: lxc network detach-profile {DEFAULT_BRIDGE} failed: "
                              f"{(proc.stderr or proc.stdout).strip()[:200]}")
    if attach:
        proc = tool.lxc(["profile", "device", "remove", "default", "eth0"], "lxd.bridge: lxc profile device remove",
                        check=False)
        if proc.returncode not in (0, 1):
            raise ModuleError("lxd.bridge: lxc profile device remove default eth0 failed: "
                              f"{(proc.stderr or proc.stdout).strip()[:200]}")


def _install(ctx: ModuleContext, drivers: list[str]) -> None:
    """LXD and the storage tools it needs, from the distro's packages, else LXD's snap."""
    from cloudseed.agent.package_managers import for_distro, get
    from cloudseed.agent.package_managers.base import PackageError

    lxd_missing = not (ctx.root.which("lxd") or ctx.root.isfile("/snap/bin/lxd"))
    packages = [("lxd", None)] if lxd_missing else []
    for driver in drivers:
        tool, package = STORAGE_TOOLS.get(driver, (None, None))
        if tool and not ctx.root.which(tool):
            packages.append((package, None))
    if not packages:
        return
    names = ", ".join(n for n, _ in packages)
    manager = for_distro(ctx)
    if manager is not None and manager.available():
        try:
            manager.update()
            manager.install(packages)
            ctx.log.info("lxd: installed %s", names)
            return
        except PackageError as e:
            first = f"{manager.tool}: {e}"
    else:
        first = "the distro has no package manager cloudseed drives"
    if lxd_missing and ctx.root.which("snap"):
        try:
            get("snap", ctx.root).install([("lxd", None)])
            ctx.log.info("lxd: installed the lxd snap (%s)", first)
            if len(packages) == 1:
                return
        except PackageError as e:
            raise ModuleError(f"lxd: cannot install LXD: {first}; snap install lxd: {e}") from None
        raise ModuleError(f"lxd: installed the lxd snap but not the storage tools ({names}): {first}")
    raise ModuleError(f"lxd: {names} not installed and cannot be installed ({first}); install lxd (the "
                      "distro's package or the lxd snap)")
