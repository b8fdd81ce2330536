"""An instance as Apache CloudStack's virtual router (and Exoscale, which runs CloudStack) describes it.

The ``meta-data/`` directory is flat: ``availability-zone``, ``cloud-identifier``,
``instance-id``, ``local-hostname``, ``local-ipv4``, ``public-hostname``, ``public-ipv4``,
``public-keys`` (every key, one per line), ``service-offering``, ``vm-id``. Settings come from
``record.clouds["cloudstack"]`` (or ``["exoscale"]``): ``cloud_identifier``, ``service_offering``,
``vm_id``; the rest from the record's common fields. The password is not here: it is the
password server's (``provider/server/password_server.py``).
"""

from __future__ import annotations

import uuid
from typing import Any

from cloudseed.clouds import cloudstack, exoscale
from cloudseed.provider.instance_data.network import private_ipv4, public_ipv4
from cloudseed.provider.registry import InstanceRecord


def meta_data(record: InstanceRecord, cloud: str = "cloudstack") -> dict[str, Any]:
    """The ``meta-data/`` entries (name -> text) of ``record`` on ``cloud`` (cloudstack or exoscale)."""
    settings = record.clouds.get(cloud) or {}
    F = (exoscale if cloud == "exoscale" else cloudstack).FIELDS  # the names of the cloud's own contract
    private = private_ipv4(record) or ""
    public = public_ipv4(record) or private
    zone_uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"cloudseed:{cloud}:{record.project_id or 'default'}")
    identifier = settings.get("cloud_identifier") or f"CloudStack-{{{zone_uuid}}}"
    return {
        F["zone"]: record.availability_zone,
        F["cloud_identifier"]: identifier,
        F["instance_id"]: record.instance_id,
        F["local_hostname"]: record.hostname,
        F["local_ipv4"]: private,
        F["public_hostname"]: public,
        F["public_ipv4"]: public,
        F["public_keys"]: "\n".join(k["data"] for k in record.ssh_keys),
        F["service_offering"]: settings.get("service_offering") or record.instance_type,
        F["vm_id"]: settings.get("vm_id") or record.instance_id,
    }
