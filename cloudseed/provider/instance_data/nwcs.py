"""An instance as NWCS's metadata service describes it: ``/api/v1/metadata`` (JSON).

Keys as cloud-init 22.4's DataSourceNWCS reads them: ``instance-id``, ``hostname``,
``public-keys``, ``userdata``, ``vendordata`` and ``network``, a version 1 network config that
names its NICs (``eth0``, ``eth1``... in MAC order; the guest renames them by MAC). Derived from
the record: an address with a prefix is a static subnet (the first NIC's IPv4 gets the first
host of its subnet as gateway), a NIC with no such address gets DHCP; a record address flagged
``public`` (NATed, floating) is not configured in the guest. The resolvers
(``clouds.nwcs.nameservers``, default Quad9's) are the first NIC's first subnet's
``dns_nameservers``: every entry must be a NIC (22.4 reads each one's ``mac_address``), so there
is no ``nameserver`` entry.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from cloudseed.clouds.nwcs import FIELDS as F
from cloudseed.provider.instance_data.network import interfaces
from cloudseed.provider.registry import InstanceRecord

NAMESERVERS = ["9.9.9.9", "149.112.112.112"]


def network_config(record: InstanceRecord) -> dict:
    config: list[dict] = []
    for index, (mac, addresses) in enumerate(interfaces(record)):
        subnets: list[dict[str, Any]] = []
        for entry in addresses:
            if entry.get("public") or entry.get("prefix") is None:
                continue
            iface = ipaddress.ip_interface(f"{entry['address']}/{entry['prefix']}")
            subnet: dict[str, Any] = {"type": "static", "address": str(iface)}
            if index == 0 and iface.version == 4 and iface.network.prefixlen < 31 and not any(
                    "gateway" in s for s in subnets):
                subnet["gateway"] = str(iface.network.network_address + 1)
            subnets.append(subnet)
        if not subnets:
            subnets.append({"type": "dhcp"})
        if index == 0:
            subnets[0]["dns_nameservers"] = list(record.clouds.get("nwcs", {}).get("nameservers") or NAMESERVERS)
        config.append({"type": "physical", "name": f"eth{index}", "mac_address": mac, "subnets": subnets})
    return {"version": 1, "config": config}


def metadata(record: InstanceRecord) -> dict[str, Any]:
    """The ``/api/v1/metadata`` document."""
    vendor = record.vendor_data
    if vendor is not None and not isinstance(vendor, str):
        vendor = vendor["cloud-init"] if isinstance(vendor, dict) and isinstance(vendor.get("cloud-init"), str) \
            else "#cloud-config\n" + json.dumps(vendor)
    return {
        F["instance_id"]: record.instance_id,
        F["hostname"]: record.hostname,
        F["public_keys"]: [k["data"] for k in record.ssh_keys],
        F["network"]: network_config(record),
        F["user_data"]: record.user_data.decode("utf-8", "replace") if record.user_data is not None else None,
        F["vendor_data"]: vendor,
    }
