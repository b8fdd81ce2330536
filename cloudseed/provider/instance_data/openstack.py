"""OpenStack metadata documents of one instance: ``meta_data.json`` per version, vendor data.

``meta_data.json`` carries what Nova's does, each key from the version that introduced it
(``versions.META_DATA_KEYS``). ``keys[].type`` is Nova's key type, ``ssh`` for every OpenSSH key
(``x509`` would be a certificate), not the key's algorithm. ``random_seed`` is left to the
publisher: the service sends fresh bytes on every request; a seed image leaves it out, so the
same instance always gives the same image.
"""

from __future__ import annotations

from typing import Any

from cloudseed.clouds.openstack import FIELDS as F
from cloudseed.provider.instance_data.versions import has_key
from cloudseed.provider.registry import InstanceRecord

SSH_KEY_TYPE = "ssh"


def meta_data(record: InstanceRecord, version: str) -> dict[str, Any]:
    """``meta_data.json`` of ``record`` for OpenStack metadata ``version`` (resolved), without ``random_seed``."""
    doc: dict[str, Any] = {
        F["instance_id"]: record.instance_id, F["name"]: record.name, F["hostname"]: record.hostname,
        F["launch_index"]: record.launch_index, F["zone"]: record.availability_zone,
        F["meta"]: dict(record.meta), F["public_keys"]: {k["name"]: k["data"] for k in record.ssh_keys},
        F["keys"]: [{F["key_name"]: k["name"], F["key_type"]: SSH_KEY_TYPE, F["key_data"]: k["data"]}
                    for k in record.ssh_keys],
        F["files"]: [],
    }
    if has_key(version, F["project_id"]):
        doc[F["project_id"]] = record.project_id
    if has_key(version, F["devices"]):
        doc[F["devices"]] = []
    if has_key(version, F["dedicated_cpus"]):
        doc[F["dedicated_cpus"]] = []  # Nova: the pinned CPUs of a dedicated-CPU flavor; none here
    return doc


def vendor_data_json(value: Any) -> Any:
    """``vendor_data.json`` / ``vendor_data2.json``: JSON, ``{}`` when none; text vendor data
    goes under ``cloud-init``, where cloud-init and cloudseed look for it."""
    if value is None:
        return {}
    if isinstance(value, str):
        return {F["vendor_cloud_init"]: value}
    return value
