"""OpenStack metadata documents of one instance: ``meta_data.json`` per version, vendor data.

``meta_data.json`` carries what Nova's does, each key from the version that introduced it
(``versions.META_DATA_KEYS``). ``keys[].type`` is Nova's key type, ``ssh`` for every OpenSSH key
(``x509`` would be a certificate), not the key's algorithm. ``random_seed`` is left to the
publisher: the service sends fresh bytes on every request; a seed image leaves it out, so the
same instance always gives the same image.
"""

from __future__ import annotations

from typing import Any

from cloudseed.provider.instance_data.versions import has_key
from cloudseed.provider.registry import InstanceRecord

SSH_KEY_TYPE = "ssh"


def meta_data(record: InstanceRecord, version: str) -> dict[str, Any]:
    """``meta_data.json`` of ``record`` for OpenStack metadata ``version`` (resolved), without ``random_seed``."""
    doc: dict[str, Any] = {
        "uuid": record.instance_id, "name": record.name, "hostname": record.hostname,
        "launch_index": record.launch_index, "availability_zone": record.availability_zone,
        "meta": dict(record.meta), "public_keys": {k["name"]: k["data"] for k in record.ssh_keys},
        "keys": [{"name": k["name"], "type": SSH_KEY_TYPE, "data": k["data"]} for k in record.ssh_keys],
        "files": [],
    }
    if has_key(version, "project_id"):
        doc["project_id"] = record.project_id
    if has_key(version, "devices"):
        doc["devices"] = []
    if has_key(version, "dedicated_cpus"):
        doc["dedicated_cpus"] = []  # Nova: the pinned CPUs of a dedicated-CPU flavor; none here
    return doc


def vendor_data_json(value: Any) -> Any:
    """``vendor_data.json`` / ``vendor_data2.json``: JSON, ``{}`` when none; text vendor data
    goes under ``cloud-init``, where cloud-init and cloudseed look for it."""
    if value is None:
        return {}
    if isinstance(value, str):
        return {"cloud-init": value}
    return value
