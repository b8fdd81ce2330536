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

import logging
import time
from typing import Any

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._metadata_service import ServiceLimits, identified_or_configured, reachable

LOG = logging.getLogger("cloudseed.datasources.cloudcix")

BASE_URL = "http://169.254.169.254/v1"
MAX_DOCUMENT = 4 * 1024 * 1024


def identified(ctx: DatasourceContext) -> str | None:
    if ctx.dmi("product_name") == "CloudCIX":
        return "DMI product_name is 'CloudCIX'"
    return None


class CloudCIX(Datasource):
    name = "CloudCIX"
    stages = (LOCAL, NETWORK)
    platform = "cloudcix"

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.metadata_address: str | None = None

    @classmethod
    def why(cls, ctx: DatasourceContext) -> str | None:
        return identified_or_configured(ctx, cls.name, identified)

    def fetch(self) -> bool:
        section = self.ctx.ds_cfg(self.name)
        limits = ServiceLimits.from_cfg(section)
        if limits.max_wait <= 0:
            return False
        if self.ctx.stage == LOCAL and not identified(self.ctx):
            return False
        md_url = str(section.get("metadata_url") or f"{BASE_URL}/metadata")
        ud_url = str(section.get("userdata_url") or md_url.rsplit("/", 1)[0] + "/userdata")
        with reachable(self.ctx, self.name) as ok:
            if not ok:
                return False
            return self._read(md_url, ud_url, limits)

    def _read(self, md_url: str, ud_url: str, limits: ServiceLimits) -> bool:
        import json

        from cloudseed.agent.datasources.hetzner import maybe_b64decode
        from cloudseed.core.http import FetchError, fetch

        started = time.monotonic()
        try:
            body = fetch(md_url, timeout=limits.max_wait, retries=0, max_bytes=MAX_DOCUMENT,
                         max_wait=limits.max_wait + 2)
        except FetchError as e:
            LOG.info("CloudCIX: %s", e)
            return False
        try:
            md: Any = json.loads(body.decode("utf-8", "replace"))
        except ValueError as e:
            raise ValueError(f"{md_url}: not JSON ({e})") from None
        if not isinstance(md, dict):
            raise ValueError(f"{md_url}: not a CloudCIX metadata document (not an object)")
        instance_id = md.get("instance-id", md.get("instance_id"))
        if instance_id in (None, ""):
            raise ValueError(f"{md_url}: not a CloudCIX metadata document (no instance_id)")
        network = md.get("network")
        if network is not None and not (isinstance(network, dict) and network.get("version") in (1, 2)):
            raise ValueError(f"{md_url}: 'network' is not a version 1 or 2 network config")
        userdata = fetch(ud_url, timeout=limits.timeout, retries=limits.retries, max_bytes=MAX_DOCUMENT,
                         max_wait=limits.timeout * (limits.retries + 1) + 2)
        hostname = md.get("local-hostname") or md.get("hostname")
        self.metadata_address = md_url
        self.metadata = {"instance-id": str(instance_id)}
        if isinstance(hostname, str) and hostname:
            self.metadata["local-hostname"] = hostname
        keys = md.get("public-keys") or []
        keys = keys if isinstance(keys, list) else [keys]
        self.public_keys = [str(k).strip() for k in keys if isinstance(k, str) and k.strip()]
        self.userdata_raw = maybe_b64decode(userdata) if userdata else None
        self.network_config = network or None
        self.raw = md
        self.subplatform = f"metadata ({md_url})"
        LOG.info("CloudCIX: read instance %s from %s in %.2fs", instance_id, md_url, time.monotonic() - started)
        return True


DATASOURCE = CloudCIX
