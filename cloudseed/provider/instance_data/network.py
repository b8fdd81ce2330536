"""An instance's network facts: NICs, private/public IPv4, ``network_data.json``, NoCloud network-config.

Addresses name their MAC when the operator gave one; the others belong to the first MAC. When
the record has no ``network_data``, an OpenStack ``network_data.json`` is derived: one ``phy``
link per MAC, a static network per address with a prefix, DHCP otherwise. NoCloud's
network-config (version 2) is derived from that same document.

Default routes: one per address family, on the first static network of that family whose subnet
holds the gateway. The gateways are the record's ``gateway`` when set (``[]``: none), else, per
family, the first address of the first static subnet of that family (as the DigitalOcean,
CloudCIX and Vultr documents have it) - unless a NIC takes that family by DHCP (its lease brings
the route), the subnet is a /31, /32, /127 or /128, or that first address is the instance's own.
DNS servers (``services`` of type ``dns``, v2 ``nameservers``) are the record's ``nameservers``,
else the gateways (IPv4's first).
"""

from __future__ import annotations

import ipaddress
from typing import Optional

from cloudseed.clouds.openstack import FIELDS as OPENSTACK
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


def gateways(record: InstanceRecord) -> list[str]:
    """The default gateways of the derived documents: the record's, or one derived per family."""
    if record.gateway is not None:
        return list(record.gateway)
    found: dict[int, str] = {}
    dhcp: set[int] = set()
    for _mac, addresses in interfaces(record):
        for entry in addresses:
            if entry.get("public"):
                continue
            family = 6 if ":" in entry["address"] else 4
            if entry.get("prefix") is None:
                if family == 4:
                    dhcp.add(4)
                continue
            if family in found:
                continue
            network = ipaddress.ip_interface(f"{entry['address']}/{entry['prefix']}").network
            if network.prefixlen >= network.max_prefixlen - 1:
                continue
            first = str(network.network_address + 1)
            if first != entry["address"]:
                found[family] = first
    return [found[f] for f in (4, 6) if f in found and f not in dhcp]


def nameservers(record: InstanceRecord) -> list[str]:
    if record.nameservers is not None:
        return list(record.nameservers)
    return gateways(record)[:1]


def network_data(record: InstanceRecord) -> dict:
    """The record's ``network_data`` or one derived from its MACs and addresses."""
    if record.network_data is not None:
        return {OPENSTACK["links"]: [], OPENSTACK["networks"]: [], OPENSTACK["services"]: [], **record.network_data}
    links, networks = [], []
    routes = {ipaddress.ip_address(g).version: g for g in gateways(record)}
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
                gateway = routes.get(iface.version)
                route = []
                if gateway is not None and ipaddress.ip_address(gateway) in iface.network:
                    default = "::" if v6 else "0.0.0.0"
                    route = [{"network": default, "netmask": default, "gateway": routes.pop(iface.version)}]
                networks.append({"id": f"network{len(networks)}", "link": link_id,
                                 "type": "ipv6" if v6 else "ipv4", "ip_address": entry["address"],
                                 "netmask": str(iface.network.netmask), "routes": route,
                                 "network_id": entry["network"]})
            elif not dhcp_done and not v6:
                dhcp_done = True
                networks.append({"id": f"network{len(networks)}", "link": link_id, "type": "ipv4_dhcp",
                                 "network_id": entry["network"]})
    return {OPENSTACK["links"]: links, OPENSTACK["networks"]: networks,
            OPENSTACK["services"]: [{"type": "dns", "address": a} for a in nameservers(record)]}


def network_config_v2(doc: dict) -> dict:
    """A small network_data.json -> network config v2 conversion (physical links only): addresses,
    DHCP, default routes and the document's DNS servers (on the NIC with the first default route)."""
    ethernets: dict = {}
    names = {}
    for index, link in enumerate(doc.get("links", [])):
        if link.get("type", "phy") not in ("phy", "ethernet", "ovs", "bridge", "tap", "vif", "hw_veb",
                                           "hyperv", "vhostuser", "dvs", "vrouter"):
            continue
        name = f"eth{index}"
        names[link.get("id")] = name
        entry: dict = {"set-name": name}
        if link.get("ethernet_mac_address"):
            entry["match"] = {"macaddress": link["ethernet_mac_address"].lower()}
        if link.get("mtu"):
            entry["mtu"] = link["mtu"]
        ethernets[name] = entry
    for network in doc.get("networks", []):
        name = names.get(network.get("link"))
        if name is None:
            continue
        entry = ethernets[name]
        kind = network.get("type", "")
        if kind in ("ipv4_dhcp", "ipv6_dhcp", "ipv6_dhcpv6-stateful", "ipv6_slaac"):
            entry["dhcp6" if kind.startswith("ipv6") else "dhcp4"] = True
        elif kind in ("ipv4", "ipv6") and network.get("ip_address"):
            netmask = network.get("netmask") or ("64" if kind == "ipv6" else "32")
            if kind == "ipv6" and ":" in netmask:  # ffff:ffff:ffff:ffff:: (what network_data gives)
                netmask = str(bin(int(ipaddress.IPv6Address(netmask))).count("1"))
            iface = ipaddress.ip_interface(f"{network['ip_address']}/{netmask}")
            entry.setdefault("addresses", []).append(str(iface))
            for route in network.get("routes", []):
                # gateway4/gateway6 (deprecated by netplan, still read by it): cloud-init 22.4 reads a
                # "to: ::/0" route as ::/64, but these keys right
                if route.get("network") in ("0.0.0.0", "::") and route.get("gateway"):
                    entry["gateway6" if kind == "ipv6" else "gateway4"] = route["gateway"]
    servers = [s["address"] for s in doc.get("services", []) if s.get("type") == "dns" and s.get("address")]
    if servers and ethernets:
        with_route = [e for e in ethernets.values() if "gateway4" in e or "gateway6" in e] or [
            e for e in ethernets.values() if e.get("addresses")]
        if with_route:
            with_route[0]["nameservers"] = {"addresses": servers}
    return {"version": 2, "ethernets": ethernets}


def nocloud_network_config(record: InstanceRecord) -> Optional[dict]:
    """NoCloud ``network-config`` of ``record`` (version 2), or None when it has no NIC to configure:
    an empty config would stop the guest's DHCP fallback, so none is published instead."""
    config = network_config_v2(network_data(record))
    return config if config["ethernets"] else None
