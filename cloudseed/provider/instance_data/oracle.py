"""An instance as Oracle Cloud's instance metadata service (IMDS) describes it: ``instance`` and ``vnics``.

Settings come from ``record.clouds["oracle"]``; the rest is derived: the instance id is the
record's id, ``ociAdName`` the availability zone (``availabilityDomain`` its ``XXXX:``-prefixed
upper-case form), the region its first ``-part``... unless set (``canonicalRegionName`` and
``regionInfo`` from the table of OCI regions, ``oci_regions.py``: ``phx`` is ``us-phoenix-1``,
key ``PHX``, realm ``oc1``); ``timeCreated`` the record's creation (epoch milliseconds);
``metadata.ssh_authorized_keys`` the record's keys one a line, ``metadata.user_data`` the
user-data in base64. One VNIC per NIC (first address of each), ``subnetCidrBlock`` from the
address prefix (/24 when none) and ``virtualRouterIp`` the first address of that subnet unless set.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from typing import Any

from cloudseed.clouds.oracle import FIELDS as F
from cloudseed.provider.instance_data import oci_regions
from cloudseed.provider.instance_data.network import interfaces
from cloudseed.provider.registry import InstanceRecord


def _ocid(kind: str, record: InstanceRecord, *extra: str) -> str:
    digest = hashlib.sha256("/".join((kind, record.instance_id, *extra)).encode()).hexdigest()[:60]
    return f"ocid1.{kind}.oc1..{digest}"


def region(record: InstanceRecord) -> str:
    oracle = record.clouds.get("oracle", {})
    zone = record.availability_zone
    return oracle.get("region") or (zone.split("-", 1)[0] if "-" in zone else zone)


def instance(record: InstanceRecord) -> dict[str, Any]:
    oracle = record.clouds.get("oracle", {})
    zone = record.availability_zone
    meta: dict[str, Any] = {}
    if record.ssh_keys:
        meta[F["ssh_keys"]] = "\n".join(k["data"] for k in record.ssh_keys)
    if record.user_data is not None:
        meta[F["user_data"]] = base64.b64encode(record.user_data).decode("ascii")
    name = region(record)
    canonical = oracle.get("canonical_region") or oci_regions.identifier(name)
    return {
        "agentConfig": {"allPluginsDisabled": False, "managementDisabled": False, "monitoringDisabled": False},
        "availabilityDomain": f"EMIr:{zone.upper()}",
        F["canonical_region"]: canonical,
        "compartmentId": oracle.get("compartment_id") or _ocid("compartment", record, record.project_id),
        "definedTags": {},
        F["display_name"]: record.name,
        "faultDomain": "FAULT-DOMAIN-1",
        "freeformTags": dict(record.tags),
        F["hostname"]: record.hostname,
        F["instance_id"]: record.instance_id,
        "image": _ocid("image", record, record.ami_id),
        F["metadata"]: meta,
        F["zone"]: zone,
        F["region"]: name,
        "regionInfo": oci_regions.region_info(canonical, oracle.get("region_key")),
        "shape": oracle.get("shape") or record.instance_type,
        "state": "Running",
        "timeCreated": created_ms(record),
    }


def created_ms(record: InstanceRecord) -> int:
    """The record's creation time (``created_at``, UTC) in epoch milliseconds, as OCI's ``timeCreated``."""
    import calendar
    import time

    try:
        return calendar.timegm(time.strptime(record.created_at, "%Y-%m-%dT%H:%M:%SZ")) * 1000
    except ValueError:  # a created_at the operator wrote another way
        return 0


def vnics(record: InstanceRecord) -> list[dict[str, Any]]:
    oracle = record.clouds.get("oracle", {})
    cidrs = oracle.get("subnet_cidrs") or {}
    routers = oracle.get("virtual_router_ips") or {}
    found = []
    for index, (mac, addresses) in enumerate(interfaces(record)):
        v4 = [a for a in addresses if ":" not in a["address"] and not a.get("public")]
        if not v4:
            continue
        entry = v4[0]
        network = cidrs.get(entry["network"]) or str(
            ipaddress.ip_interface(f"{entry['address']}/{entry.get('prefix', 24)}").network)
        net = ipaddress.ip_network(network, strict=False)
        vnic: dict[str, Any] = {F["mac"]: mac, F["private_ip"]: entry["address"], F["subnet"]: str(net),
                                "virtualRouterIp": routers.get(entry["network"]) or str(net.network_address + 1),
                                "vlanTag": index, "vnicId": _ocid("vnic", record, mac)}
        if oracle.get("bare_metal"):
            vnic["nicIndex"] = index
        found.append(vnic)
    return found
