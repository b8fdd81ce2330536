"""Facts every API derives from an ``InstanceRecord``: its NICs, private/public IPv4, network_data.

Addresses name their MAC when the operator gave one; the others belong to the first MAC. When
the record has no ``network_data``, an OpenStack ``network_data.json`` is derived: one ``phy``
link per MAC, a static network per address with a prefix, DHCP otherwise.
"""

from __future__ import annotations

import ipaddress
from typing import Optional

from cloudseed.provider.registry import InstanceRecord


def interfaces(record: InstanceRecord) -> list[tuple[str, list[dict]]]:
    """[(mac, [address dicts])] in MAC order; addresses without a MAC go to the first NIC."""
    macs = list(record.macs)
    for entry in record.addresses:
        if entry.get("mac") and entry["mac"] not in macs:
            macs.append(entry["mac"])
    result: list[tuple[str, list[dict]]] = [(mac, []) for mac in macs]
    for entry in record.addresses:
        index = macs.index(entry["mac"]) if entry.get("mac") else 0
        if result:
            result[index][1].append(entry)
    return result


def private_ipv4(record: InstanceRecord) -> Optional[str]:
    for entry in record.addresses:
        if not entry.get("public") and ":" not in entry["address"]:
            return entry["address"]
    return None


def public_ipv4(record: InstanceRecord) -> Optional[str]:
    for entry in record.addresses:
        if entry.get("public") and ":" not in entry["address"]:
            return entry["address"]
    return None


def network_data(record: InstanceRecord) -> dict:
    """The record's ``network_data`` or one derived from its MACs and addresses."""
    if record.network_data is not None:
        return {"links": [], "networks": [], "services": [], **record.network_data}
    links, networks = [], []
    for index, (mac, addresses) in enumerate(interfaces(record)):
        link_id = f"tap{index}"
        links.append({"id": link_id, "vif_id": f"{record.instance_id}-{index}", "type": "phy",
                      "ethernet_mac_address": mac, "mtu": None})
        dhcp_done = False
        for entry in addresses:
            if entry.get("public"):
                continue  # a floating address is NATed, not configured in the guest
            v6 = ":" in entry["address"]
            if entry.get("prefix") is not None:
                iface = ipaddress.ip_interface(f"{entry['address']}/{entry['prefix']}")
                networks.append({"id": f"network{len(networks)}", "link": link_id,
                                 "type": "ipv6" if v6 else "ipv4", "ip_address": entry["address"],
                                 "netmask": str(iface.network.netmask), "routes": [],
                                 "network_id": entry["network"]})
            elif not dhcp_done and not v6:
                dhcp_done = True
                networks.append({"id": f"network{len(networks)}", "link": link_id, "type": "ipv4_dhcp",
                                 "network_id": entry["network"]})
    return {"links": links, "networks": networks, "services": []}


def region(record: InstanceRecord, configured: str) -> str:
    """The configured region, else the availability zone without its trailing letter (us-east-1a)."""
    if configured:
        return configured
    zone = record.availability_zone
    if len(zone) > 1 and zone[-1].isalpha() and zone[-2].isdigit():
        return zone[:-1]
    return zone
