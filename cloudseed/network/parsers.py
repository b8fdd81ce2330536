"""Which parser reads a given network config, and the MAC -> name resolver they share."""

from __future__ import annotations

from typing import Optional

from cloudseed.network.errors import NetworkConfigError
from cloudseed.network.model import NetworkModel, fail

KINDS = ("auto", "v1", "v2", "openstack")


class MacResolver:
    """Maps MAC addresses to interface names: a given map, or the system's ``/sys/class/net``."""

    def __init__(self, macs: Optional[dict] = None, root=None):
        self._given = None if macs is None else {str(k).lower(): v for k, v in macs.items()}
        self._root = root
        self._system: Optional[dict] = None

    def name_for(self, mac: str) -> Optional[str]:
        table = self._given
        if table is None:
            if self._system is None:
                from cloudseed.network.sysnet import interfaces_by_mac

                self._system = interfaces_by_mac(self._root)
            table = self._system
        return table.get(mac.lower())

    def known(self) -> list:
        table = self._given if self._given is not None else (self._system or {})
        return sorted(table)


def detect_kind(data: dict) -> str:
    if "version" not in data and any(k in data for k in ("links", "networks", "services")):
        return "openstack"
    version = data.get("version")
    if version in (1, "1"):
        return "v1"
    if version in (2, "2"):
        return "v2"
    if "version" not in data:
        raise NetworkConfigError("version: missing (expected 1 or 2, or an OpenStack network_data.json)")
    raise NetworkConfigError(f"version: unsupported network config version {version!r} (expected 1 or 2)")


def parse(data: dict, kind: str = "auto", macs: Optional[dict] = None, root=None) -> NetworkModel:
    if kind not in KINDS:
        raise NetworkConfigError(f"unknown network config kind {kind!r} (expected one of {', '.join(KINDS)})")
    if not isinstance(data, dict):
        raise NetworkConfigError(f"network config: expected a mapping, got {type(data).__name__}")
    prefix = ""
    if "network" in data and kind != "openstack":
        if len(data) != 1:
            extra = sorted(str(k) for k in data if k != "network")   # keys may be any YAML scalar
            raise fail(str(extra[0]), "unexpected key beside 'network'")
        data = data["network"]
        prefix = "network"
        if not isinstance(data, dict):
            raise fail(prefix, f"expected a mapping, got {type(data).__name__}")
    if data.get("config") == "disabled":
        raise fail(prefix, "network configuration is disabled (config: disabled); nothing to parse")
    try:
        detected = detect_kind(data)
    except NetworkConfigError as e:
        if prefix:
            raise NetworkConfigError(f"{prefix}.{e}") from None
        raise
    if kind == "auto":
        kind = detected
    elif kind != detected:
        raise fail(prefix or "version", f"expected network config {kind}, got {detected}")
    resolver = MacResolver(macs, root)
    if kind == "v1":
        from cloudseed.network.v1 import parse_v1

        model = parse_v1(data, prefix)
    elif kind == "v2":
        from cloudseed.network.v2 import parse_v2

        model = parse_v2(data, prefix, resolver)
    else:
        from cloudseed.network.openstack import parse_openstack

        model = parse_openstack(data, resolver)
    return model
