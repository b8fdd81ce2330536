"""An instance as Scaleway's metadata service describes it: ``/conf?format=json``.

Settings come from ``record.clouds["scaleway"]``; the rest is derived: the server ``id`` (a UUID
derived from the record's id unless ``server_id`` is given), ``hostname``/``name``, the public
and private IPv4, ``ipv6`` (address, gateway, netmask) from the first IPv6 address, ``location``
and ``zone`` from the availability zone, ``ssh_public_keys`` from the record's keys and ``tags``
(where ``AUTHORIZED_KEY=<key with spaces as _>`` tags add keys, as on Scaleway).
"""

from __future__ import annotations

import hashlib
import ipaddress
import uuid
from typing import Any, Optional

from cloudseed.clouds.scaleway import FIELDS as F
from cloudseed.provider.instance_data.network import private_ipv4, public_ipv4
from cloudseed.provider.registry import InstanceRecord


def server_id(record: InstanceRecord) -> str:
    configured = record.clouds.get("scaleway", {}).get("server_id")
    if configured:
        return str(configured)
    return str(uuid.UUID(bytes=hashlib.sha256(record.instance_id.encode()).digest()[:16], version=4))


def guest_instance_id(record: InstanceRecord) -> str:
    """The instance-id this cloud's guest reads (what a user-data signature served here covers)."""
    return str(server_id(record))


def ipv6(record: InstanceRecord) -> Optional[dict]:
    for entry in record.addresses:
        if ":" in entry["address"]:
            prefix = int(entry.get("prefix", 64))
            net = ipaddress.ip_interface(f"{entry['address']}/{prefix}").network
            return {F["address"]: entry["address"], F["gateway"]: str(net.network_address + 1),
                    F["netmask"]: str(prefix)}
    return None


def _fingerprint(key: str) -> str:
    import base64

    parts = key.split()
    try:
        blob = base64.b64decode(parts[1]) if len(parts) > 1 else key.encode()
    except ValueError:
        blob = key.encode()
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"256 SHA256:{digest} {parts[2] if len(parts) > 2 else ''} ({parts[0] if parts else ''})".replace("  ", " ")


def metadata(record: InstanceRecord) -> dict[str, Any]:
    sw = record.clouds.get("scaleway", {})
    zone = record.availability_zone
    public = public_ipv4(record)
    private = private_ipv4(record)
    return {
        F["instance_id"]: server_id(record),
        F["name"]: record.name or record.hostname,
        F["hostname"]: record.hostname,
        F["commercial_type"]: sw.get("commercial_type") or record.instance_type,
        F["organization"]: sw.get("organization") or record.project_id or "",
        F["project"]: sw.get("organization") or record.project_id or "",
        F["tags"]: list(sw.get("server_tags") or []),
        F["state_detail"]: "booted",
        F["public_ip"]: {F["ip_id"]: str(uuid.uuid5(uuid.NAMESPACE_URL, f"ip:{public}")), F["address"]: public,
                         F["dynamic"]: False, F["family"]: "inet"} if public else None,
        F["private_ip"]: private,
        F["ipv6"]: ipv6(record),
        F["location"]: {F["zone_id"]: zone, F["platform_id"]: "14", F["cluster_id"]: "1", F["hypervisor_id"]: "1",
                        F["node_id"]: "1"},
        F["zone"]: zone,
        F["ssh_public_keys"]: [{F["key"]: k["data"], F["fingerprint"]: _fingerprint(k["data"])}
                               for k in record.ssh_keys],
        F["extra_volumes"]: {},
        F["timezone"]: "UTC",
    }


def vendor_data(record: InstanceRecord) -> Optional[bytes]:
    import json

    vendor = record.vendor_data
    if vendor is None:
        return None
    if isinstance(vendor, str):
        return vendor.encode("utf-8")
    if isinstance(vendor, dict) and isinstance(vendor.get("cloud-init"), str):
        return vendor["cloud-init"].encode("utf-8")
    return ("#cloud-config\n" + json.dumps(vendor)).encode("utf-8")
