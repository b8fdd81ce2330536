"""Reading network devices from ``/sys/class/net`` inside a target root (stdlib only).

Every function takes the root (a ``TargetRoot``, a directory, or None for ``/``), so tests can
build a fake ``sys/class/net`` tree in a temporary directory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

SYS_CLASS_NET = "/sys/class/net"
ARPHRD_ETHER = 1
ARPHRD_LOOPBACK = 772


def host_path(root, inner: str) -> str:
    """Host path of ``inner`` under ``root`` (TargetRoot, str or None)."""
    if root is None:
        return inner
    if isinstance(root, str):
        return os.path.join(root, inner.lstrip("/")) if root != "/" else inner
    return root.path(inner)


def _read(root, dev: str, attr: str) -> Optional[str]:
    try:
        with open(host_path(root, f"{SYS_CLASS_NET}/{dev}/{attr}"), encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except (OSError, ValueError):
        return None


def _read_int(root, dev: str, attr: str) -> Optional[int]:
    text = _read(root, dev, attr)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _exists(root, dev: str, attr: str) -> bool:
    return os.path.exists(host_path(root, f"{SYS_CLASS_NET}/{dev}/{attr}"))


@dataclass
class Device:
    name: str
    mac: Optional[str]
    kind: str            # ether, loopback, bridge, bond, vlan, veth, other
    driver: Optional[str]
    carrier: Optional[int]
    operstate: Optional[str]
    stolen_mac: bool     # addr_assign_type 2: the MAC belongs to another device
    master: Optional[str]


def list_devices(root=None) -> list[Device]:
    """Every device in ``/sys/class/net`` with what the fallback and MAC lookups need."""
    base = host_path(root, SYS_CLASS_NET)
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    return [device(root, n) for n in names if not n.startswith(".")]


def device(root, name: str) -> Device:
    mac = (_read(root, name, "address") or "").lower() or None
    arptype = _read_int(root, name, "type")
    uevent = _read(root, name, "uevent") or ""
    devtype = ""
    for line in uevent.splitlines():
        if line.startswith("DEVTYPE="):
            devtype = line.split("=", 1)[1].strip()
    driver = None
    link = host_path(root, f"{SYS_CLASS_NET}/{name}/device/driver")
    if os.path.islink(link):
        driver = os.path.basename(os.readlink(link))
    if name == "lo" or arptype == ARPHRD_LOOPBACK:
        kind = "loopback"
    elif _exists(root, name, "bridge") or devtype == "bridge":
        kind = "bridge"
    elif _exists(root, name, "bonding") or devtype == "bond":
        kind = "bond"
    elif devtype == "vlan" or os.path.exists(host_path(root, f"/proc/net/vlan/{name}")):
        kind = "vlan"
    elif name.startswith("veth"):
        # as cloud-init does: container hosts name their veth ends veth*; a veth renamed to
        # eth0 inside a namespace is the guest's NIC and stays a candidate
        kind = "veth"
    elif arptype in (None, ARPHRD_ETHER):
        kind = "ether"
    else:
        kind = "other"
    master = None
    mlink = host_path(root, f"{SYS_CLASS_NET}/{name}/master")
    if os.path.islink(mlink):
        master = os.path.basename(os.readlink(mlink))
    return Device(
        name=name, mac=mac, kind=kind, driver=driver,
        carrier=_read_int(root, name, "carrier"), operstate=_read(root, name, "operstate"),
        stolen_mac=_read_int(root, name, "addr_assign_type") == 2, master=master,
    )


_ZERO_MAC = re.compile(r"^(00:)*00$")


def interfaces_by_mac(root=None) -> dict[str, str]:
    """lowercase MAC -> name for real NICs (no bridges, bonds, vlans, stolen or zero MACs)."""
    out: dict[str, str] = {}
    for dev in list_devices(root):
        if dev.kind in ("loopback", "bridge", "bond", "vlan") or not dev.mac or dev.stolen_mac:
            continue
        if _ZERO_MAC.match(dev.mac):
            continue
        out.setdefault(dev.mac, dev.name)
    return out


_NAT = re.compile(r"([0-9]+)")


def natural_key(name: str) -> list:
    """Sort key putting eth2 before eth10."""
    return [int(t) if t.isdigit() else t.lower() for t in _NAT.split(name)]
