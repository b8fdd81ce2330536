"""wireguard: WireGuard interfaces from ``wireguard: {interfaces, readinessprobe}``.

Each interface's configuration (it holds a private key) is written 0600 to its ``config_path``
and ``wg-quick@NAME`` is enabled, so it comes up at every boot; on the running system the kernel
module is loaded, the interface started, and the ``readinessprobe`` commands are run (each
bounded in time) so that later modules can rely on the tunnel. ``wireguard-tools`` is installed
through the distro's package manager when ``wg`` is missing. No configuration content is ever
logged or quoted in the status.
"""

from __future__ import annotations

import re

from cloudseed.agent.modules import STAGE_CONFIG, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import CommandError

PROBE_TIMEOUT = 60.0
_NAME = re.compile(r"^[A-Za-z0-9_=+.-]{1,15}$")  # what wg-quick accepts as an interface name

MODULE = ModuleSpec(
    name="wireguard", stage=STAGE_CONFIG, activate_by=("wireguard",),
    title="Set up WireGuard interfaces",
    schema={"properties": {"wireguard": {
        "type": ["object", "null"],
        "additionalProperties": False,
        "required": ["interfaces"],
        "properties": {
            "interfaces": {"type": "array", "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "config_path", "content"],
                "properties": {
                    "name": {"type": "string", "description": "Interface name (wg-quick@NAME)."},
                    "config_path": {"type": "string", "description": "Where its configuration is written."},
                    "content": {"type": "string", "description": "The wg-quick configuration (written 0600)."},
                },
            }},
            "readinessprobe": {"type": "array", "items": {"type": "string"},
                               "description": "Shell commands that must succeed once the interfaces are up."},
        },
    }}},
    examples=(
        """\
#cloud-config
wireguard:
  interfaces:
    - name: wg0
      config_path: /etc/wireguard/wg0.conf
      content: |
        [Interface]
        PrivateKey = 2Yo3uIKNyyYtKPhHvfDqH5dDj9FsQ1Nqs0Y0BbiS1Wc=
        Address = 10.10.0.2/24
        [Peer]
        PublicKey = Fn/Ma5/ITMoqAXn5KsR/8hOhZ9S4QcKuLRGyCbBmEgI=
        Endpoint = 192.0.2.1:51820
        AllowedIPs = 10.10.0.0/24
  readinessprobe:
    - ping -qc 5 10.10.0.1 2>&1 > /dev/null
""",
    ),
)


def interfaces(cfg: dict) -> list[dict]:
    section = cfg.get("wireguard") or {}
    if not isinstance(section, dict) or not isinstance(section.get("interfaces"), list):
        raise ModuleError("wireguard.interfaces: expected a list of {name, config_path, content}")
    out = []
    for index, entry in enumerate(section["interfaces"]):
        where = f"wireguard.interfaces[{index}]"
        if not isinstance(entry, dict):
            raise ModuleError(f"{where}: expected a mapping with name, config_path and content")
        for key in ("name", "config_path", "content"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise ModuleError(f"{where}.{key}: missing or not a string")
        if not _NAME.match(entry["name"]):
            raise ModuleError(f"{where}.name: not a usable interface name (at most 15 of A-Z a-z 0-9 _=+.-)")
        if not entry["config_path"].startswith("/"):
            raise ModuleError(f"{where}.config_path: expected an absolute path")
        out.append(entry)
    return out


def probes(cfg: dict) -> list[str]:
    value = (cfg.get("wireguard") or {}).get("readinessprobe") or []
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ModuleError("wireguard.readinessprobe: expected a list of shell commands")
    return value


def handle(ctx: ModuleContext) -> None:
    wanted, checks = interfaces(ctx.cfg), probes(ctx.cfg)
    _ensure_tools(ctx)
    for entry in wanted:
        ctx.root.write(entry["config_path"], entry["content"], mode=0o600, owner="root", group="root")
        ctx.log.info("wireguard %s: configuration written to %s", entry["name"], entry["config_path"])
    problems = []
    live = ctx.root.is_live and ctx.root.exists("/run/systemd/system")
    if live:
        _load_kernel_module(ctx, problems)
    for entry in wanted:
        unit = f"wg-quick@{entry['name']}"
        try:
            ctx.root.run(["systemctl", "enable", unit] if live else ["systemctl", "--quiet", "enable", unit],
                         timeout=60)
        except CommandError as e:
            problems.append(f"wireguard: enabling {unit}: {e}")
            continue
        if live and not ctx.distro.manage_service("restart", unit):
            problems.append(f"wireguard: starting {unit} failed (journalctl -u {unit})")
    if live and not problems:
        problems += _run_probes(ctx, checks)
    if problems:
        raise ModuleError("; ".join(problems))


def _ensure_tools(ctx: ModuleContext) -> None:
    if ctx.root.which("wg") and ctx.root.which("wg-quick"):
        return
    from cloudseed.agent.package_managers import for_distro
    from cloudseed.agent.package_managers.base import PackageError

    manager = for_distro(ctx)
    if manager is None:
        raise ModuleError("wireguard: wireguard-tools is not installed and this distro has no package manager")
    try:
        manager.update()
        manager.install([("wireguard-tools", None)])
    except PackageError as e:
        raise ModuleError(f"wireguard: installing wireguard-tools: {e}") from None


def _load_kernel_module(ctx: ModuleContext, problems: list[str]) -> None:
    if ctx.root.exists("/sys/module/wireguard"):
        return
    try:
        ctx.root.run(["modprobe", "wireguard"], timeout=30)
    except CommandError as e:
        problems.append(f"wireguard: loading the kernel module: {e}")


def _run_probes(ctx: ModuleContext, checks: list[str]) -> list[str]:
    failed = []
    for index, command in enumerate(checks):
        try:
            ctx.root.run(["/bin/sh", "-c", command], timeout=PROBE_TIMEOUT)
        except CommandError as e:
            failed.append(f"wireguard.readinessprobe[{index}]: failed ({e.returncode})")
    return failed
