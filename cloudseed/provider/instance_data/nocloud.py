"""NoCloud documents of one instance: ``meta-data`` and ``vendor-data`` (network-config is in ``network``).

The same for ``/nocloud/`` on the service and a ``cidata`` seed image.
"""

from __future__ import annotations

import json
from typing import Any

from cloudseed.clouds.nocloud import FIELDS as F
from cloudseed.provider.registry import InstanceRecord


def meta_data(record: InstanceRecord) -> dict[str, Any]:
    """``meta-data``: instance-id, local-hostname and public-keys (when the instance has keys)."""
    doc: dict[str, Any] = {F["instance_id"]: record.instance_id, F["local_hostname"]: record.hostname}
    if record.ssh_keys:
        doc[F["public_keys"]] = [k["data"] for k in record.ssh_keys]
    return doc


def vendor_text(vendor_data: Any) -> str:
    """OpenStack-style vendor data as NoCloud text: a string, or the dict's ``cloud-init`` part."""
    if vendor_data is None:
        return ""
    if isinstance(vendor_data, str):
        return vendor_data
    if isinstance(vendor_data, dict) and isinstance(vendor_data.get("cloud-init"), str):
        return vendor_data["cloud-init"]
    return "#cloud-config\n" + json.dumps(vendor_data) + "\n" if isinstance(vendor_data, dict) else ""
