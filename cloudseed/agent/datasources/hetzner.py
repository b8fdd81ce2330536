"""Hetzner: Hetzner Cloud's metadata service, ``http://169.254.169.254/hetzner/v1/``.

Possible only where DMI ``sys_vendor`` is ``Hetzner`` (the server id is the DMI serial), or when
``datasource: Hetzner: {metadata_url: ...}`` is configured. Two requests: ``metadata`` (YAML) and
``userdata`` (base64-decoded when it is valid base64, as cloud-init does). Read as cloud-init
22.4 reads it: ``instance-id`` (which must equal the DMI serial: a disk moved to another server
is refused), ``hostname``, ``public-keys``, ``vendor_data``, and the ``network-config`` as given;
region and availability zone from ``region`` and ``availability-zone``. In the local stage the
service is read through a temporary DHCP lease (Hetzner has DHCP).
"""

from __future__ import annotations

import time
from typing import Any

from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import MetadataServiceDatasource, ServiceLimits, listed_keys
from cloudseed.clouds.hetzner import CLOUD

MD_URL, UD_URL = (CLOUD.addresses[0] + CLOUD.requests[r].path for r in ("meta_data", "user_data"))  # clouds/hetzner.py
F = CLOUD.fields
MAX_DOCUMENT = 4 * 1024 * 1024


def maybe_b64decode(data: bytes) -> bytes:
    import base64
    import binascii

    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data


class Hetzner(MetadataServiceDatasource):
    name = "Hetzner"
    platform = "hetzner"
    detection = (
        Dmi("sys_vendor", "Hetzner"),
        Setting("metadata_url"),
    )

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        from cloudseed.core.http import fetch
        from cloudseed.core.yaml_loading import load_yaml

        md_url = str(section.get("metadata_url") or MD_URL)
        ud_url = str(section.get("userdata_url") or UD_URL)
        started = time.monotonic()
        body = self.get_document(md_url, limits, retries=0, raise_in_network=False)
        if body is None:
            return False
        md: Any = load_yaml(body.decode("utf-8", "replace"))
        if not isinstance(md, dict) or md.get(F["instance_id"]) in (None, ""):
            raise ValueError(f"{md_url}: not a Hetzner metadata document (no instance-id)")
        userdata = fetch(ud_url, timeout=limits.timeout, retries=limits.retries, max_bytes=MAX_DOCUMENT,
                         max_wait=limits.timeout * (limits.retries + 1) + 2)
        instance_id = str(md[F["instance_id"]])
        serial = self.ctx.dmi("product_serial")
        if self.identified(self.ctx) and serial and serial != instance_id:
            raise ValueError(f"Hetzner: the DMI serial {serial!r} does not match instance-id {instance_id!r} "
                             f"from {md_url}")
        self.metadata = {"instance-id": instance_id, "local-hostname": str(md.get(F["hostname"]) or instance_id),
                         "network-config": md.get(F["network_config"]),
                         "public-keys": md.get(F["public_keys"])}
        self.public_keys = listed_keys(md.get(F["public_keys"]))
        self.userdata_raw = maybe_b64decode(userdata) if userdata else None
        self.served_at("user-data", ud_url)
        self.served_at("vendor-data", f"{md_url}/{F['vendor_data']}")  # a key of the metadata, served as text
        vendor = md.get(F["vendor_data"])
        self.vendordata_raw = str(vendor).encode("utf-8") if vendor else None
        network = md.get(F["network_config"])
        self.network_config = network if isinstance(network, dict) and network else None
        self.region = str(md[F["region"]]) if md.get(F["region"]) else None
        self.availability_zone = str(md[F["zone"]]) if md.get(F["zone"]) else None
        self.raw = {k: v for k, v in md.items() if k != F["vendor_data"]}
        return self.found(md_url, instance_id, started, "server")


DATASOURCE = Hetzner
