"""The fallback network config: DHCP on the NIC most likely to be connected.

Candidates are the root's ``/sys/class/net`` devices with an Ethernet MAC, except loopback,
``veth*`` (container host ends), bridges, bonds and VLANs. Devices with carrier come first, then
devices that may get one (down, dormant, unknown); within each group ``ethN`` names first, then
the rest, each in natural order (eth2 before eth10).
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

from cloudseed.network.sysnet import list_devices, natural_key


class Nic(NamedTuple):
    """A candidate NIC: a ``(name, mac)`` tuple whose ``str()`` is the name."""

    name: str
    mac: str

    def __str__(self) -> str:
        return self.name


_ETH = re.compile(r"^eth\d+$")
_ZERO = re.compile(r"^(00:)+00$")


def candidates(root, blacklist_drivers: Optional[list] = None) -> list:
    """(name, mac) of candidate NICs, best first."""
    blacklist = set(blacklist_drivers or [])
    connected, possible = [], []
    for dev in list_devices(root):
        if dev.kind not in ("ether",) or not dev.mac or _ZERO.match(dev.mac):
            continue
        if dev.driver and dev.driver in blacklist:
            continue
        if dev.carrier == 1:
            connected.append(dev)
        elif dev.operstate in ("dormant", "down", "lowerlayerdown", "unknown", None):
            possible.append(dev)

    def key(dev):
        return (0 if _ETH.match(dev.name) else 1, natural_key(dev.name))

    return [Nic(d.name, d.mac) for d in sorted(connected, key=key) + sorted(possible, key=key)]


def choose_fallback_nic(root) -> Optional[Nic]:
    """``(name, mac)`` of the NIC to run DHCP on (``str()`` gives the name), or None."""
    found = candidates(root)
    return found[0] if found else None


def fallback_config(root) -> dict:
    """Network config v2 with DHCPv4 on the fallback NIC, matched by MAC; ``{}`` without a NIC."""
    nic = choose_fallback_nic(root)
    if nic is None:
        return {}
    name, mac = nic
    return {"version": 2, "ethernets": {name: {"match": {"macaddress": mac}, "set-name": name, "dhcp4": True}}}
