"""An instance as Akamai's (Linode's) metadata service describes it: ``/v1/instance``, ``/v1/network``,
``/v1/ssh-keys`` and ``/v1/user-data``.

Based on Akamai's published Metadata service API reference (the JSON shapes of each endpoint) and
cloud-init 23.4's DataSourceAkamai (what a guest reads); not in cloud-init 22.4. Settings come from
``record.clouds["akamai"]``; the rest is derived: the numeric Linode ``id`` (the record's id when
it is digits, else a stable number; the guest also sees it as its DMI serial), ``label`` (the
hostname), ``region`` (the availability zone), ``type`` (the instance type), ``tags``; the network
document from the record's addresses; the SSH keys as root's; user-data base64-encoded, as
Linode stores and serves it.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from cloudseed.clouds.akamai import FIELDS as F
from cloudseed.provider.registry import InstanceRecord


def linode_id(record: InstanceRecord) -> int:
    configured = record.clouds.get("akamai", {}).get("numeric_id")
    if configured is not None:
        return int(configured)
    if record.instance_id.isdigit() and len(record.instance_id) <= 18:
        return int(record.instance_id)
    return int.from_bytes(hashlib.sha256(record.instance_id.encode()).digest()[:4], "big")


def guest_instance_id(record: InstanceRecord) -> str:
    """The instance-id this cloud's guest reads (what a user-data signature served here covers)."""
    return str(linode_id(record))


def instance(record: InstanceRecord) -> dict[str, Any]:
    ak = record.clouds.get("akamai", {})
    return {
        F["instance_id"]: linode_id(record),
        "host_uuid": ak.get("host_uuid") or hashlib.sha256(f"host:{record.instance_id}".encode()).hexdigest()[:40],
        F["label"]: ak.get("label") or record.hostname or record.name,
        F["region"]: ak.get("region") or record.availability_zone,
        "type": ak.get("type") or record.instance_type,
        "tags": list(ak.get("tags") or sorted(record.tags)),
        "specs": {"vcpus": 1, "memory": 2048, "disk": 51200, "transfer": 2000, "gpus": 0},
        "backups": {"enabled": False, "status": None},
    }


def network(record: InstanceRecord) -> dict[str, Any]:
    public, private, ranges = [], [], []
    for entry in record.addresses:
        address = entry["address"]
        if ":" in address:
            ranges.append(f"{address}/{entry.get('prefix', 64)}")
        elif entry.get("public") or not _is_private(address):
            public.append(f"{address}/32")
        else:
            private.append(f"{address}/{entry.get('prefix', 17)}")
    return {"interfaces": [], "ipv4": {"public": public, "private": private, "shared": [], "elastic": []},
            "ipv6": {"slaac": ranges[0] if ranges else None, "ranges": ranges[1:], "link_local": None,
                     "shared_ranges": [], "elastic_ranges": []}}


def _is_private(address: str) -> bool:
    import ipaddress

    return ipaddress.ip_address(address).is_private


def ssh_keys(record: InstanceRecord) -> dict[str, Any]:
    return {F["users"]: {"root": [k["data"] for k in record.ssh_keys]}}


def user_data(record: InstanceRecord) -> bytes:
    return base64.b64encode(record.user_data) if record.user_data else b""
