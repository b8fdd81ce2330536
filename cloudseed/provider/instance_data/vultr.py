"""An instance as Vultr's metadata service describes it: ``/v1.json`` (and the ``/v1/`` path tree).

Settings come from ``record.clouds["vultr"]``; the rest is derived. The first NIC is the
``public`` interface: its public address (else its first IPv4) with netmask and gateway (the
first address of the subnet; /23 when the address has no prefix), further IPv4s as
``additional``, its first IPv6 (network, prefix) and further IPv6 networks as ``additional``.
Other NICs are ``private`` (VPC) interfaces: first IPv4 and netmask (/20 by default), MTU
(``private_mtu``, default 1450); a private NIC without IPv4 is ``unconfigured``. ``vendor-data``
is a list of cloud-config texts, as Vultr's; ``user-data`` the raw text ("" when none).
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any, Optional

from cloudseed.clouds.vultr import FIELDS as F
from cloudseed.provider.instance_data.network import interfaces
from cloudseed.provider.registry import InstanceRecord

PUBLIC_PREFIX, PRIVATE_PREFIX, PRIVATE_MTU = 23, 20, 1450


def _v4(entry: Optional[dict], prefix: int, gateway: bool) -> dict:
    if entry is None:
        return {F["additional"]: [], F["address"]: "", F["gateway"]: "", F["netmask"]: ""}
    iface = ipaddress.ip_interface(f"{entry['address']}/{entry.get('prefix', prefix)}")
    gw = str(iface.network.network_address + 1) if gateway and iface.network.prefixlen < 31 else ""
    return {F["additional"]: [], F["address"]: entry["address"], F["gateway"]: gw, F["netmask"]: str(iface.netmask)}


def _net6(entry: dict) -> tuple[str, str]:
    iface = ipaddress.ip_interface(f"{entry['address']}/{entry.get('prefix', 64)}")
    return str(iface.network.network_address), str(iface.network.prefixlen)


def _vendor_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict) and isinstance(value.get("cloud-init"), str):
        return [value["cloud-init"]]
    return ["#cloud-config\n" + json.dumps(value)]


def region(record: InstanceRecord) -> dict:
    vultr = record.clouds.get("vultr", {})
    code = vultr.get("region") or record.availability_zone.split("-")[0] or "ewr"
    doc = {F["region_code"]: code.upper()}
    if vultr.get("country_code"):
        doc[F["country_code"]] = str(vultr["country_code"]).upper()
    return doc


def guest_instance_id(record: InstanceRecord) -> str:
    """The instance-id this cloud's guest reads (what a user-data signature served here covers)."""
    return str(record.clouds.get("vultr", {}).get("instance_id") or record.instance_id)


def metadata(record: InstanceRecord) -> dict[str, Any]:
    """The ``/v1.json`` document."""
    vultr = record.clouds.get("vultr", {})
    nics = []
    for index, (mac, addresses) in enumerate(interfaces(record)):
        v4 = [a for a in addresses if ":" not in a["address"]]
        v6 = [a for a in addresses if ":" in a["address"]]
        if index == 0:
            chosen = next((a for a in v4 if a.get("public")), v4[0] if v4 else None)
            ipv4 = _v4(chosen, PUBLIC_PREFIX, True)
            ipv4[F["additional"]] = [{F["address"]: a["address"], F["netmask"]: _v4(a, 32, False)[F["netmask"]]}
                                     for a in v4 if a is not chosen]
            ipv6: dict[str, Any] = {F["additional"]: [], F["address"]: "", F["network"]: "", F["prefix"]: ""}
            if v6:
                network, prefix = _net6(v6[0])
                ipv6 = {F["additional"]: [dict(zip((F["network"], F["prefix"]), _net6(a))) for a in v6[1:]],
                        F["address"]: v6[0]["address"], F["network"]: network, F["prefix"]: prefix}
            nics.append({F["ipv4"]: ipv4, F["ipv6"]: ipv6, F["mac"]: mac, F["network_type"]: "public"})
            continue
        nic: dict[str, Any] = {F["ipv4"]: _v4(v4[0] if v4 else None, PRIVATE_PREFIX, False),
                               F["ipv6"]: {F["additional"]: [], F["network"]: "", F["prefix"]: ""},
                               F["mac"]: mac, F["network_type"]: "private",
                               F["mtu"]: int(vultr.get("private_mtu") or PRIVATE_MTU)}
        if v4:
            nic[F["network_id"]] = v4[0]["network"]
            nic[F["network_id_v1"]] = v4[0]["network"]
        else:
            nic[F["unconfigured"]] = True
        nics.append(nic)
    instance_id = guest_instance_id(record)
    doc: dict[str, Any] = {
        F["hostname"]: record.hostname,
        F["instance_id"]: instance_id,
        F["instance_id_v1"]: instance_id,
        F["interfaces"]: nics,
        F["public_keys"]: [k["data"] for k in record.ssh_keys],
        F["region"]: region(record),
        F["tags"]: list(record.tags),
        F["startup_script"]: str(vultr.get("startup_script") or ""),
        F["user_defined"]: [],
        F["user_data"]: record.user_data.decode("utf-8", "replace") if record.user_data is not None else "",
        F["vendor_data"]: _vendor_list(record.vendor_data),
    }
    return doc
