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

from cloudseed.provider.instance_data.network import interfaces
from cloudseed.provider.registry import InstanceRecord

PUBLIC_PREFIX, PRIVATE_PREFIX, PRIVATE_MTU = 23, 20, 1450


def _v4(entry: Optional[dict], prefix: int, gateway: bool) -> dict:
    if entry is None:
        return {"additional": [], "address": "", "gateway": "", "netmask": ""}
    iface = ipaddress.ip_interface(f"{entry['address']}/{entry.get('prefix', prefix)}")
    gw = str(iface.network.network_address + 1) if gateway and iface.network.prefixlen < 31 else ""
    return {"additional": [], "address": entry["address"], "gateway": gw, "netmask": str(iface.netmask)}


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
    doc = {"regioncode": code.upper()}
    if vultr.get("country_code"):
        doc["countrycode"] = str(vultr["country_code"]).upper()
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
            ipv4["additional"] = [{"address": a["address"], "netmask": _v4(a, 32, False)["netmask"]}
                                  for a in v4 if a is not chosen]
            ipv6: dict[str, Any] = {"additional": [], "address": "", "network": "", "prefix": ""}
            if v6:
                network, prefix = _net6(v6[0])
                ipv6 = {"additional": [dict(zip(("network", "prefix"), _net6(a))) for a in v6[1:]],
                        "address": v6[0]["address"], "network": network, "prefix": prefix}
            nics.append({"ipv4": ipv4, "ipv6": ipv6, "mac": mac, "network-type": "public"})
            continue
        nic: dict[str, Any] = {"ipv4": _v4(v4[0] if v4 else None, PRIVATE_PREFIX, False),
                               "ipv6": {"additional": [], "network": "", "prefix": ""},
                               "mac": mac, "network-type": "private",
                               "mtu": int(vultr.get("private_mtu") or PRIVATE_MTU)}
        if v4:
            nic["network-v2-id"] = v4[0]["network"]
            nic["networkid"] = v4[0]["network"]
        else:
            nic["unconfigured"] = True
        nics.append(nic)
    instance_id = guest_instance_id(record)
    doc: dict[str, Any] = {
        "hostname": record.hostname,
        "instance-v2-id": instance_id,
        "instanceid": instance_id,
        "interfaces": nics,
        "public-keys": [k["data"] for k in record.ssh_keys],
        "region": region(record),
        "tags": list(record.tags),
        "startup-script": str(vultr.get("startup_script") or ""),
        "user-defined": [],
        "user-data": record.user_data.decode("utf-8", "replace") if record.user_data is not None else "",
        "vendor-data": _vendor_list(record.vendor_data),
    }
    return doc
