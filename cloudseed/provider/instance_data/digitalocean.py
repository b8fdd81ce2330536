"""An instance as DigitalOcean's droplet metadata service describes it: ``/metadata/v1.json``.

Settings come from ``record.clouds["digitalocean"]``; the rest is derived: the first NIC is the
``public`` interface (its public address, else its first IPv4; its first IPv6), a second NIC the
``private`` one; netmasks from the address prefixes (/20 when none is given, as DO's public
ranges), gateways the first address of the subnet unless set. ``tree`` is the same data as the
``/metadata/v1/`` path tree names it (``id``, ``user-data``, ``ipv4/address``...).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from typing import Any, Optional

from cloudseed.clouds.digitalocean import FIELDS as F
from cloudseed.provider.instance_data.network import interfaces
from cloudseed.provider.registry import InstanceRecord

DEFAULT_NAMESERVERS = ["67.207.67.2", "67.207.67.3"]


def droplet_id(record: InstanceRecord) -> int:
    configured = record.clouds.get("digitalocean", {}).get("droplet_id")
    if configured is not None:
        return int(configured)
    if record.instance_id.isdigit() and len(record.instance_id) <= 18:
        return int(record.instance_id)
    return int.from_bytes(hashlib.sha256(record.instance_id.encode()).digest()[:4], "big")


def guest_instance_id(record: InstanceRecord) -> str:
    """The instance-id this cloud's guest reads (what a user-data signature served here covers)."""
    return str(droplet_id(record))


def _ipv4(entry: dict, gateway: Optional[str]) -> dict:
    iface = ipaddress.ip_interface(f"{entry['address']}/{entry.get('prefix', 20)}")
    hosts = iface.network.network_address + 1 if iface.network.prefixlen < 31 else iface.ip
    return {F["ip_address"]: entry["address"], F["netmask"]: str(iface.netmask), F["gateway"]: gateway or str(hosts)}


def _ipv6(entry: dict) -> dict:
    iface = ipaddress.ip_interface(f"{entry['address']}/{entry.get('prefix', 64)}")
    return {F["ip_address"]: entry["address"], F["cidr"]: iface.network.prefixlen,
            F["gateway"]: str(iface.network.network_address + 1)}


def metadata(record: InstanceRecord) -> dict[str, Any]:
    """The ``/metadata/v1.json`` document."""
    do = record.clouds.get("digitalocean", {})
    nics: dict[str, list] = {}
    for index, (mac, addresses) in enumerate(interfaces(record)[:2]):
        kind = F["public"] if index == 0 else F["private"]
        v4 = [a for a in addresses if ":" not in a["address"]]
        v6 = [a for a in addresses if ":" in a["address"]]
        chosen = next((a for a in v4 if a.get("public")), v4[0] if v4 else None) if index == 0 else \
            (v4[0] if v4 else None)
        nic: dict[str, Any] = {F["mac"]: mac, F["type"]: kind}
        if chosen is not None:
            nic[F["ipv4"]] = _ipv4(chosen, do.get("gateway") if index == 0 else None)
        if v6 and index == 0:
            nic[F["ipv6"]] = _ipv6(v6[0])
        if index == 0 and do.get("anchor_ipv4"):
            nic[F["anchor_ipv4"]] = dict(do["anchor_ipv4"])
        nics[kind] = [nic]
    floating = do.get("floating_ip")
    floating_doc = {F["ipv4"]: {"active": True, F["ip_address"]: floating} if floating else {"active": False}}
    doc: dict[str, Any] = {
        F["instance_id"]: droplet_id(record),
        F["hostname"]: record.hostname,
        F["public_keys"]: [k["data"] for k in record.ssh_keys],
        F["auth_key"]: hashlib.sha256(f"auth/{record.instance_id}".encode()).hexdigest()[:32],
        F["region"]: do.get("region") or record.availability_zone,
        F["interfaces"]: nics,
        F["floating_ip"]: floating_doc,
        F["reserved_ip"]: floating_doc,
        F["dns"]: {F["nameservers"]: list(do.get("nameservers") or DEFAULT_NAMESERVERS)},
        F["tags"]: list(do.get("tags") if do.get("tags") is not None else record.tags),
        F["features"]: dict(do.get("features") or {"dhcp_enabled": False}),
        F["vendor_data"]: _vendor_text(record.vendor_data),
    }
    if record.user_data is not None:
        doc[F["user_data"]] = record.user_data.decode("utf-8", "replace")
    return doc


def _vendor_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("cloud-init"), str):
        return value["cloud-init"]
    return "#cloud-config\n" + json.dumps(value)


_RENAMES = {F["instance_id"]: "id", F["user_data"]: "user-data", F["vendor_data"]: "vendor-data",
            F["public_keys"]: "public-keys", F["ip_address"]: "address", F["auth_key"]: "auth-key"}


def tree(doc: Any) -> Any:
    """The ``/metadata/v1/`` path tree of ``doc``: DO's path names, lists as ``0/``, ``1/``..."""
    if isinstance(doc, dict):
        return {_RENAMES.get(k, k): (v if k == F["public_keys"] else tree(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [tree(v) for v in doc]
    return doc
