"""CloudCIX: the metadata service, ``http://169.254.169.254/v1/metadata`` and ``/v1/userdata``.

Not in cloud-init 22.4; based on cloud-init 24.x's DataSourceCloudCIX and its documented example:
possible only where DMI ``product_name`` is ``CloudCIX`` (or ``datasource: CloudCIX:
{metadata_url: ...}`` is configured). The JSON
document gives ``instance_id`` and ``network`` (netplan version 2, used as the network config as
given); cloud-init's generic ``instance-id``, ``local-hostname`` and ``public-keys`` are read
when present. User-data is base64-decoded when it is valid base64 (as 24.x does). Deliberate
difference from 24.x (which reads it in the network stage only): it is read in the local stage
too, through a temporary DHCP lease, so that its network config is written before networking
starts; without a lease the network stage reads it.
"""

from __future__ import annotations

import time
from typing import Any

from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import MetadataServiceDatasource, ServiceLimits
from cloudseed.clouds.cloudcix import CLOUD

MD_URL = CLOUD.addresses[0] + CLOUD.requests["meta_data"].path  # the wire contract: clouds/cloudcix.py
F = CLOUD.fields
MAX_DOCUMENT = 4 * 1024 * 1024


class CloudCIX(MetadataServiceDatasource):
    name = "CloudCIX"
    platform = "cloudcix"
    detection = (
        Dmi("product_name", "CloudCIX"),
        Setting("metadata_url"),
    )

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        import json

        from cloudseed.agent.datasources.hetzner import maybe_b64decode
        from cloudseed.core.http import fetch

        md_url = str(section.get("metadata_url") or MD_URL)
        ud_url = str(section.get("userdata_url") or md_url.rsplit("/", 1)[0] + CLOUD.tail("user_data"))
        started = time.monotonic()
        body = self.get_document(md_url, limits, retries=0, raise_in_network=False)
        if body is None:
            return False
        try:
            md: Any = json.loads(body.decode("utf-8", "replace"))
        except ValueError as e:
            raise ValueError(f"{md_url}: not JSON ({e})") from None
        if not isinstance(md, dict):
            raise ValueError(f"{md_url}: not a CloudCIX metadata document (not an object)")
        instance_id = md.get(F["instance_id"], md.get(F["instance_id_alt"]))
        if instance_id in (None, ""):
            raise ValueError(f"{md_url}: not a CloudCIX metadata document (no instance_id)")
        network = md.get(F["network"])
        if network is not None and not (isinstance(network, dict) and network.get("version") in (1, 2)):
            raise ValueError(f"{md_url}: '{F['network']}' is not a version 1 or 2 network config")
        userdata = fetch(ud_url, timeout=limits.timeout, retries=limits.retries, max_bytes=MAX_DOCUMENT,
                         max_wait=limits.timeout * (limits.retries + 1) + 2)
        hostname = md.get(F["hostname"]) or md.get(F["hostname_alt"])
        self.metadata = {"instance-id": str(instance_id)}
        if isinstance(hostname, str) and hostname:
            self.metadata["local-hostname"] = hostname
        keys = md.get(F["public_keys"]) or []
        keys = keys if isinstance(keys, list) else [keys]
        self.public_keys = [str(k).strip() for k in keys if isinstance(k, str) and k.strip()]
        self.userdata_raw = maybe_b64decode(userdata) if userdata else None
        self.served_at("user-data", ud_url)
        self.network_config = network or None
        self.raw = md
        return self.found(md_url, instance_id, started)


DATASOURCE = CloudCIX
