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

from cloudseed.provider.instance_data.network import interfaces
from cloudseed.provider.registry import InstanceRecord

DNS4 = ["94.237.127.9", "94.237.40.9"]
DNS6 = ["2a04:3540:53::1", "2a04:3544:53::1"]


def _address(entry: dict, public_nic: bool, dns4: list[str]) -> dict:
    v6 = ":" in entry["address"]
    family = "IPv6" if v6 else "IPv4"
    if entry.get("public"):
        return {"address": entry["address"], "dhcp": False, "dns": [], "family": family, "floating": True,
                "gateway": "", "network": f"{entry['address']}/{128 if v6 else 32}"}
    iface = ipaddress.ip_interface(f"{entry['address']}/{entry.get('prefix', 64 if v6 else 22)}")
    return {"address": entry["address"], "dhcp": True,
            "dns": list(DNS6 if v6 else dns4) if public_nic else [], "family": family, "floating": False,
            "gateway": str(iface.network.network_address + 1) if iface.network.num_addresses > 2 else "",
            "network": str(iface.network)}


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
        nics.append({"index": index + 1, "ip_addresses": [_address(a, kind == "public", dns4) for a in addresses],
                     "mac": mac, "network_id": _network_id(network), "type": kind})
    return {
        "cloud_name": "upcloud",
        "instance_id": guest_instance_id(record),
        "hostname": record.hostname,
        "platform": "servers",
        "subplatform": "metadata (http://169.254.169.254)",
        "public_keys": [k["data"] for k in record.ssh_keys],
        "region": uc.get("region") or record.availability_zone,
        "network": {"interfaces": nics, "dns": dns4},
        "storage": {"disks": []},
        "tags": list(record.tags),
        "user_data": record.user_data.decode("utf-8", "replace") if record.user_data is not None else "",
        "vendor_data": _vendor_text(record.vendor_data),
    }


def _vendor_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("cloud-init"), str):
        return value["cloud-init"]
    return "#cloud-config\n" + json.dumps(value)
