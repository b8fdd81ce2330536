"""An instance as CloudCIX's metadata service describes it: ``/v1/metadata`` (JSON) and ``/v1/userdata``.

Based on cloud-init 24.x's DataSourceCloudCIX and its documented example (not in cloud-init 22.4):
the document has ``instance_id`` and ``network`` (netplan version 2: one ethernet per NIC,
matched by MAC and renamed ``ethN``, static addresses, nameservers, a default route on the first
NIC). cloud-init's generic keys are added so a guest reads identity as it does everywhere:
``instance-id``, ``local-hostname`` and ``public-keys``. Settings come from
``record.clouds["cloudcix"]``: ``gateway`` (default: the first address of the first NIC's
subnet), ``nameservers`` (default: the gateway), ``search``.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from cloudseed.clouds.cloudcix import FIELDS as F
from cloudseed.provider.instance_data.network import interfaces
from cloudseed.provider.registry import InstanceRecord


def network_config(record: InstanceRecord) -> dict[str, Any]:
    cix = record.clouds.get("cloudcix", {})
    ethernets: dict[str, Any] = {}
    gateway = cix.get("gateway")
    for index, (mac, addresses) in enumerate(interfaces(record)):
        name = f"eth{index}"
        nic: dict[str, Any] = {"match": {"macaddress": mac}, "set-name": name}
        cidrs = []
        for entry in addresses:
            default = 64 if ":" in entry["address"] else 24
            iface = ipaddress.ip_interface(f"{entry['address']}/{entry.get('prefix', default)}")
            cidrs.append(str(iface))
            if index == 0 and gateway is None and iface.version == 4:
                gateway = str(iface.network.network_address + 1)
        if cidrs:
            nic["addresses"] = cidrs
        else:
            nic["dhcp4"] = True
        if index == 0 and gateway and cidrs:
            nic["routes"] = [{"to": "default", "via": gateway}]
        nameservers = list(cix.get("nameservers") or ([gateway] if gateway else []))
        if nameservers and cidrs:
            nic["nameservers"] = {"addresses": nameservers, "search": list(cix.get("search") or [])}
        ethernets[name] = nic
    return {"version": 2, "ethernets": ethernets}


def metadata(record: InstanceRecord) -> dict[str, Any]:
    return {
        F["instance_id_alt"]: record.instance_id,
        F["instance_id"]: record.instance_id,
        F["hostname"]: record.hostname,
        F["public_keys"]: [k["data"] for k in record.ssh_keys],
        F["network"]: network_config(record),
    }
