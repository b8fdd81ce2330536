"""NoCloud over HTTP (``ds=nocloud;s=http://169.254.169.254/nocloud/``): four small files.

``meta-data`` is YAML (instance-id, local-hostname, public-keys), ``user-data`` the raw
user-data (empty when none: NoCloud requires the file), ``vendor-data`` the vendor-data text and
``network-config`` a network config version 2 derived from the instance's network data.
"""

from __future__ import annotations

import json
from typing import Optional

import yaml

from cloudseed.provider.registry import InstanceRecord
from cloudseed.provider.server.http import Response
from cloudseed.provider.server.instance_view import network_data

FILES = ("meta-data", "user-data", "vendor-data", "network-config")


def render(record: InstanceRecord, name: str) -> Optional[Response]:
    if name == "":
        return Response(200, "\n".join(FILES))
    if name == "meta-data":
        doc = {"instance-id": record.instance_id, "local-hostname": record.hostname}
        if record.ssh_keys:
            doc["public-keys"] = [k["data"] for k in record.ssh_keys]
        return Response(200, yaml.safe_dump(doc, sort_keys=False), "text/yaml")
    if name == "user-data":
        return Response(200, record.user_data or b"", "application/octet-stream")
    if name == "vendor-data":
        return Response(200, _vendor_text(record.vendor_data), "application/octet-stream")
    if name == "network-config":
        return Response(200, yaml.safe_dump(network_config_v2(network_data(record)), sort_keys=False),
                        "text/yaml")
    return None


def _vendor_text(vendor_data: object) -> str:
    """OpenStack-style vendor data to NoCloud text: a string, or the dict's ``cloud-init`` part."""
    if vendor_data is None:
        return ""
    if isinstance(vendor_data, str):
        return vendor_data
    if isinstance(vendor_data, dict) and isinstance(vendor_data.get("cloud-init"), str):
        return vendor_data["cloud-init"]
    return "#cloud-config\n" + json.dumps(vendor_data) + "\n" if isinstance(vendor_data, dict) else ""


def network_config_v2(doc: dict) -> dict:
    """A small network_data.json -> network config v2 conversion (physical links only)."""
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
            import ipaddress

            netmask = network.get("netmask") or ("64" if kind == "ipv6" else "32")
            iface = ipaddress.ip_interface(f"{network['ip_address']}/{netmask}")
            entry.setdefault("addresses", []).append(str(iface))
            for route in network.get("routes", []):
                if route.get("network") in ("0.0.0.0", "::") and route.get("gateway"):
                    entry["gateway6" if kind == "ipv6" else "gateway4"] = route["gateway"]
    return {"version": 2, "ethernets": ethernets}
