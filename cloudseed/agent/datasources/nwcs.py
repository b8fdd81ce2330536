"""NWCS: NWCS's metadata service, ``http://169.254.169.254/api/v1/metadata``.

Possible only where DMI ``sys_vendor`` is ``NWCS``, or when ``datasource: NWCS: {metadata_url:
...}`` is configured. One request. Read as cloud-init 22.4 reads it: ``instance-id``,
``hostname``, ``public-keys``, ``userdata``, ``vendordata``, and ``network`` (version 1) as
given, each entry with a ``mac_address`` the system has renamed to the system's name for it.
Unlike 22.4 (which fails on any entry without ``mac_address``), such entries (a ``nameserver``)
are kept as they are. NWCS names no region or zone. In the local stage the service is read
through a temporary DHCP lease, as 22.4 does.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import (
    MetadataServiceDatasource,
    ServiceLimits,
    listed_keys,
    system_macs,
)
from cloudseed.clouds.nwcs import CLOUD

LOG = logging.getLogger("cloudseed.datasources.nwcs")

DEFAULT_URL = CLOUD.addresses[0] + CLOUD.requests["document"].path  # the wire contract: clouds/nwcs.py
F = CLOUD.fields


class NWCSError(Exception):
    pass


def network_config(network: Any, macs: dict[str, str]) -> dict | None:
    """``network`` with its NICs renamed by MAC (None when it configures nothing)."""
    if not isinstance(network, dict) or not isinstance(network.get("config"), list) or not network["config"]:
        return None
    config = []
    for entry in network["config"]:
        if not isinstance(entry, dict):
            LOG.warning("NWCS: a network config entry that is no mapping (%s) left out", type(entry).__name__)
            continue
        if isinstance(entry.get("mac_address"), str):
            name = macs.get(entry["mac_address"].lower())
            entry = {**entry, "name": name} if name else dict(entry)
        config.append(entry)
    return {**network, "config": config}


class NWCS(MetadataServiceDatasource):
    name = "NWCS"
    platform = "nwcs"
    detection = (
        Dmi("sys_vendor", "NWCS"),
        Setting("metadata_url"),
    )
    error = NWCSError

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        url = str(section.get("metadata_url") or DEFAULT_URL)
        started = time.monotonic()
        body = self.get_document(url, limits)
        if body is None:
            return False
        md = self.json_object(body, url)
        instance_id = md.get(F["instance_id"])
        if isinstance(instance_id, bool) or not isinstance(instance_id, (str, int)) or instance_id == "":
            raise NWCSError(f"NWCS metadata {url}: no instance-id")
        self.metadata = {"instance-id": str(instance_id), "local-hostname": md.get(F["hostname"]),
                         "public-keys": md.get(F["public_keys"]), "network": md.get(F["network"])}
        self.public_keys = listed_keys(md.get(F["public_keys"]))
        for attr, kind, key in (("userdata_raw", "user-data", F["user_data"]),
                                ("vendordata_raw", "vendor-data", F["vendor_data"])):
            value = md.get(key)
            setattr(self, attr, value.encode("utf-8") if isinstance(value, str) and value else None)
            self.served_at(kind, f"{url}/{key}")  # each key is served as text beside the document
        self.network_config = network_config(md.get(F["network"]), system_macs())
        self.raw = {k: v for k, v in md.items() if k not in (F["user_data"], F["vendor_data"])}
        return self.found(url, instance_id, started)


DATASOURCE = NWCS
