"""AliYun: Alibaba Cloud ECS's metadata service, ``http://100.100.100.200/2016-01-01/``.

Possible only where DMI ``product_name`` is ``Alibaba Cloud ECS`` (as cloud-init 22.4 and its
ds-identify check), or when ``datasource: AliYun: {metadata_urls: [...]}`` is configured.
Network stage only (as 22.4). Read as 22.4 reads it (an EC2-shaped crawl of version
2016-01-01, no session token): ``meta-data/`` (bounded, as the Ec2 datasource's crawl),
``user-data``; the hostname is ``hostname`` (default ``localhost.localdomain``), the keys
``public-keys/<n>/openssh-key`` (or plain values), the network config (version 2) from
``network/interfaces/macs/`` as the Ec2 datasource builds it. Unlike 22.4 (whose region and
availability zone stay empty on AliYun), the region is ``region-id`` and the zone ``zone-id``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from cloudseed.agent.datasources import NETWORK
from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import MetadataServiceDatasource, ServiceLimits, urls_from_cfg
from cloudseed.clouds.aliyun import CLOUD

LOG = logging.getLogger("cloudseed.datasources.aliyun")

DEFAULT_URLS = CLOUD.addresses  # the wire contract: clouds/aliyun.py
VERSION = CLOUD.versions[0]
F = CLOUD.fields  # the tree's names
PRODUCT = "Alibaba Cloud ECS"
MAX_USERDATA = 16 * 1024 * 1024


def public_keys(value: Any) -> list[str]:
    """Keys of ``public-keys``: {id: key | [keys] | {openssh-key: key | [keys]}} (as 22.4 reads them)."""
    keys: list[str] = []
    for body in (value.values() if isinstance(value, dict) else []):
        if isinstance(body, dict):
            body = body.get(F["openssh_key"], [])
        for key in body if isinstance(body, list) else [body]:
            if isinstance(key, str) and key.strip():
                keys.append(key.strip())
    return keys


class AliYun(MetadataServiceDatasource):
    name = "AliYun"
    stages = (NETWORK,)
    platform = "aliyun"
    detection = (
        Dmi("product_name", PRODUCT),
        Setting("metadata_urls"),
    )

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        from cloudseed.agent.datasources.ec2 import read_compatible_service

        started = time.monotonic()
        read = read_compatible_service(CLOUD, urls_from_cfg(section, DEFAULT_URLS), VERSION, limits,
                                       MAX_USERDATA)
        if read is None:
            return False
        base, meta, userdata = read
        instance_id = self._fill(meta, userdata)
        self.served_at("user-data", base + CLOUD.requests["user_data"].target(VERSION))
        return self.found(base, instance_id, started, "")

    def _fill(self, meta: dict[str, Any], userdata: bytes) -> str:
        """Fill the datasource from the crawled tree; the instance id."""
        from cloudseed.agent.datasources.ec2 import network_config_from_macs

        md = dict(meta)
        md["instance-id"] = instance_id = str(meta[F["instance_id"]]).strip()
        hostname = meta.get(F["hostname"])
        md["local-hostname"] = hostname.strip() if isinstance(hostname, str) and hostname.strip() \
            else "localhost.localdomain"
        self.metadata = md
        self.public_keys = public_keys(meta.get(F["public_keys"]))
        zone, region = meta.get(F["zone"]), meta.get(F["region"])
        self.availability_zone = zone.strip() if isinstance(zone, str) and zone.strip() else None
        self.region = region.strip() if isinstance(region, str) and region.strip() else None
        self.userdata_raw = userdata or None
        network = meta.get(F["network"])
        macs = ((network.get(F["interfaces"]) or {}) if isinstance(network, dict) else {})
        macs = macs.get(F["macs"]) if isinstance(macs, dict) else None
        if isinstance(macs, dict) and self.ctx.ds_cfg(self.name).get("apply_network_config", True) is not False:
            self.network_config = network_config_from_macs(macs)
        self.raw = {"meta-data": meta, "_metadata_api_version": VERSION}
        return instance_id


DATASOURCE = AliYun
