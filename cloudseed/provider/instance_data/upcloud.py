"""An instance as UpCloud's metadata service describes it: ``/metadata/v1.json``.

Settings come from ``record.clouds["upcloud"]`` (its presence is what makes the shared
``/metadata/v1.json`` path answer UpCloud's document instead of DigitalOcean's); the rest is
derived. NIC 0 is ``public``, the others ``private`` (``utility`` when the address's network is
named ``utility``); each address is ``dhcp`` with its network (/22 for IPv4, /64 for IPv6 when
no prefix is given), the first host of it as gateway, and UpCloud's resolvers on public NICs; a
record address flagged ``public`` is a floating IP: not DHCP, a /32, no gateway. ``network.dns``
is the IPv4 resolvers (``nameservers``). Shape as in UpCloud's documentation and the example in
cloud-init 22.4's helpers/upcloud.py.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from typing import Any

from cloudseed.clouds.upcloud import FIELDS as F
from cloudseed.provider.instance_data.network import interfaces
from cloudseed.provider.registry import InstanceRecord

DNS4 = ["94.237.127.9", "94.237.40.9"]
DNS6 = ["2a04:3540:53::1", "2a04:3544:53::1"]


def _address(entry: dict, public_nic: bool, dns4: list[str]) -> dict:
    v6 = ":" in entry["address"]
    family = F["ipv6_family"] if v6 else F["ipv4_family"]
    if entry.get("public"):
        return {F["address"]: entry["address"], F["dhcp"]: False, F["dns"]: [], F["family"]: family,
                F["floating"]: True, F["gateway"]: "", F["address_network"]: f"{entry['address']}/{128 if v6 else 32}"}
    iface = ipaddress.ip_interface(f"{entry['address']}/{entry.get('prefix', 64 if v6 else 22)}")
    return {F["address"]: entry["address"], F["dhcp"]: True,
            F["dns"]: list(DNS6 if v6 else dns4) if public_nic else [], F["family"]: family, F["floating"]: False,
            F["gateway"]: str(iface.network.network_address + 1) if iface.network.num_addresses > 2 else "",
            F["address_network"]: str(iface.network)}


def _network_id(name: str) -> str:
    digest = hashlib.sha256(f"upcloud-network/{name}".encode()).hexdigest()
    return f"03{digest[:6]}-{digest[6:10]}-4{digest[10:13]}-8{digest[13:16]}-{digest[16:28]}"


def guest_instance_id(record: InstanceRecord) -> str:
    """The instance-id this cloud's guest reads (what a user-data signature served here covers)."""
    return str(record.clouds.get("upcloud", {}).get("instance_id") or record.instance_id)


def metadata(record: InstanceRecord) -> dict[str, Any]:
    """The ``/metadata/v1.json`` document."""
    uc = record.clouds.get("upcloud", {})
    dns4 = list(uc.get("nameservers") or DNS4)
    nics = []
    for index, (mac, addresses) in enumerate(interfaces(record)):
        network = addresses[0]["network"] if addresses else "default"
        kind = "public" if index == 0 else ("utility" if network == "utility" else "private")
        nics.append({F["index"]: index + 1,
                     F["ip_addresses"]: [_address(a, kind == "public", dns4) for a in addresses],
                     F["mac"]: mac, F["network_id"]: _network_id(network), F["type"]: kind})
    return {
        F["cloud_name"]: "upcloud",
        F["instance_id"]: guest_instance_id(record),
        F["hostname"]: record.hostname,
        F["platform"]: "servers",
        F["subplatform"]: "metadata (http://169.254.169.254)",
        F["public_keys"]: [k["data"] for k in record.ssh_keys],
        F["region"]: uc.get("region") or record.availability_zone,
        F["network"]: {F["interfaces"]: nics, F["dns"]: dns4},
        F["storage"]: {F["disks"]: []},
        F["tags"]: list(record.tags),
        F["user_data"]: record.user_data.decode("utf-8", "replace") if record.user_data is not None else "",
        F["vendor_data"]: _vendor_text(record.vendor_data),
    }


def _vendor_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("cloud-init"), str):
        return value["cloud-init"]
    return "#cloud-config\n" + json.dumps(value)
