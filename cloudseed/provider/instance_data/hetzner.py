"""An instance as Hetzner Cloud's metadata service describes it: ``/hetzner/v1/metadata`` (YAML).

Settings come from ``record.clouds["hetzner"]``; the rest is derived: the numeric instance id
(which the guest checks against its DMI serial) from the record's id when it is digits, else a
stable number; ``network-config`` (version 1) is what Hetzner publishes: DHCPv4 on the first NIC
(``eth0``) plus its IPv6 address statically with gateway ``fe80::1``; private networks from the
addresses of the other NICs.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from typing import Any

from cloudseed.clouds.hetzner import FIELDS as F
from cloudseed.provider.instance_data.network import interfaces, private_ipv4, public_ipv4
from cloudseed.provider.registry import InstanceRecord

NAMESERVERS = ["185.12.64.2", "185.12.64.1"]


def instance_id(record: InstanceRecord) -> int:
    configured = record.clouds.get("hetzner", {}).get("numeric_id")
    if configured is not None:
        return int(configured)
    if record.instance_id.isdigit() and len(record.instance_id) <= 18:
        return int(record.instance_id)
    return int.from_bytes(hashlib.sha256(record.instance_id.encode()).digest()[:4], "big")


def guest_instance_id(record: InstanceRecord) -> str:
    """The instance-id this cloud's guest reads (what a user-data signature served here covers)."""
    return str(instance_id(record))


def network_config(record: InstanceRecord) -> dict:
    nics = interfaces(record)
    if not nics:
        return {"version": 1, "config": []}
    mac, addresses = nics[0]
    subnets: list[dict[str, Any]] = [{"ipv4": True, "type": "dhcp", "dns_nameservers": list(NAMESERVERS)}]
    for entry in addresses:
        if ":" in entry["address"]:
            subnets.append({"type": "static", "ipv6": True, "gateway": "fe80::1",
                            "address": f"{entry['address']}/{entry.get('prefix', 64)}",
                            "dns_nameservers": ["2a01:4ff:ff00::add:2", "2a01:4ff:ff00::add:1"]})
    return {"version": 1, "config": [{"type": "physical", "name": "eth0", "mac_address": mac, "subnets": subnets}]}


def private_networks(record: InstanceRecord) -> list[dict]:
    configured = record.clouds.get("hetzner", {}).get("private_networks")
    if configured is not None:
        return [dict(n) for n in configured]
    found = []
    for index, (mac, addresses) in enumerate(interfaces(record)[1:], start=1):
        for entry in addresses:
            if ":" in entry["address"] or entry.get("public"):
                continue
            net = ipaddress.ip_interface(f"{entry['address']}/{entry.get('prefix', 24)}").network
            found.append({"ip": entry["address"], "alias_ips": [], "interface_num": index, "mac_address": mac,
                          "network_id": int.from_bytes(hashlib.sha256(entry["network"].encode()).digest()[:3], "big"),
                          "network_name": entry["network"], "network": str(net), "subnet": str(net),
                          "gateway": str(net.network_address + 1)})
            break
    return found


def metadata(record: InstanceRecord) -> dict[str, Any]:
    hz = record.clouds.get("hetzner", {})
    zone = record.availability_zone
    vendor = record.vendor_data
    if vendor is not None and not isinstance(vendor, str):
        vendor = vendor.get("cloud-init") if isinstance(vendor, dict) and "cloud-init" in vendor else \
            "#cloud-config\n" + json.dumps(vendor)
    nics = interfaces(record)
    first_private = next((a["address"] for a in (nics[0][1] if nics else []) if not a.get("public")
                          and ":" not in a["address"]), None)
    doc: dict[str, Any] = {
        F["zone"]: zone,
        F["hostname"]: record.hostname,
        F["instance_id"]: instance_id(record),
        F["local_ipv4"]: "",
        F["network_config"]: network_config(record),
        F["public_ipv4"]: public_ipv4(record) or first_private or private_ipv4(record) or "",
        F["public_keys"]: [k["data"] for k in record.ssh_keys],
        F["region"]: hz.get("region") or (zone.rsplit("-", 1)[0] if "-" in zone else zone),
    }
    if vendor is not None:
        doc[F["vendor_data"]] = vendor
    return doc
