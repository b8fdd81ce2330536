"""An instance as MAAS's metadata API describes it: the files under ``/MAAS/metadata/2012-03-01/``.

``meta-data/instance-id`` (the record's instance id), ``meta-data/local-hostname`` (its hostname),
``meta-data/public-keys`` (one key per line), ``meta-data/vendor-data`` (YAML, as MAAS wraps it:
``{"cloud-init": "#cloud-config ..."}``; absent when the record has none) and ``user-data`` (raw;
absent: 404, as MAAS answers). The OAuth credentials are in ``record.clouds["maas"]``.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from cloudseed.clouds.maas import FIELDS as F
from cloudseed.provider.registry import InstanceRecord

META_DATA = tuple(F[k] for k in ("instance_id", "local_hostname", "public_keys", "vendor_data"))


def vendor_data(record: InstanceRecord) -> Optional[str]:
    import yaml

    vendor: Any = record.vendor_data
    if vendor is None:
        return None
    if isinstance(vendor, dict) and F["vendor_cloud_init"] in vendor:
        vendor = vendor[F["vendor_cloud_init"]]
    if not isinstance(vendor, str):
        vendor = "#cloud-config\n" + json.dumps(vendor)
    return yaml.safe_dump({F["vendor_cloud_init"]: vendor}, default_flow_style=False)


def meta_data(record: InstanceRecord, name: str) -> Optional[str]:
    """One ``meta-data/`` file's text, None when the instance has none."""
    if name == F["instance_id"]:
        return record.instance_id
    if name == F["local_hostname"]:
        return record.hostname or record.name or record.instance_id
    if name == F["public_keys"]:
        return "\n".join(k["data"] for k in record.ssh_keys)
    if name == F["vendor_data"]:
        return vendor_data(record)
    return None


def credentials(record: InstanceRecord) -> Optional[dict[str, str]]:
    """The OAuth keys the guest must sign with, None when the record names none (then nothing is served)."""
    maas = record.clouds.get("maas") or {}
    if not all(maas.get(k) for k in ("consumer_key", "token_key", "token_secret")):
        return None
    return {k: str(maas.get(k) or "") for k in ("consumer_key", "token_key", "token_secret", "consumer_secret")}
