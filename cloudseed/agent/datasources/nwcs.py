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

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._metadata_service import (
    ServiceLimits,
    identified_or_configured,
    reachable,
    system_macs,
)

LOG = logging.getLogger("cloudseed.datasources.nwcs")

DEFAULT_URL = "http://169.254.169.254/api/v1/metadata"
MAX_DOCUMENT = 4 * 1024 * 1024


class NWCSError(Exception):
    pass


def identified(ctx: DatasourceContext) -> str | None:
    if ctx.dmi("sys_vendor") == "NWCS":
        return "DMI sys_vendor is 'NWCS'"
    return None


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


class NWCS(Datasource):
    name = "NWCS"
    stages = (LOCAL, NETWORK)
    platform = "nwcs"

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "nwcs"
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
        url = str(section.get("metadata_url") or DEFAULT_URL)
        with reachable(self.ctx, self.name) as ok:
            if not ok:
                return False
            return self._read(url, limits)

    def _read(self, url: str, limits: ServiceLimits) -> bool:
        import json

        from cloudseed.core.http import FetchError, fetch

        started = time.monotonic()
        try:
            body = fetch(url, timeout=limits.max_wait, retries=limits.retries, max_bytes=MAX_DOCUMENT,
                         max_wait=limits.max_wait * (limits.retries + 1) + 2)
        except FetchError as e:
            if self.ctx.stage == LOCAL:
                LOG.info("NWCS: %s; leaving it to the network stage", e)
                return False
            raise NWCSError(f"NWCS metadata {e}") from None
        try:
            md = json.loads(body.decode("utf-8", "replace"))
        except ValueError as e:
            raise NWCSError(f"NWCS metadata {url}: not a JSON document ({e})") from None
        if not isinstance(md, dict):
            raise NWCSError(f"NWCS metadata {url}: expected a JSON object, got {type(md).__name__}")
        instance_id = md.get("instance-id")
        if isinstance(instance_id, bool) or not isinstance(instance_id, (str, int)) or instance_id == "":
            raise NWCSError(f"NWCS metadata {url}: no instance-id")
        self.metadata = {"instance-id": str(instance_id), "local-hostname": md.get("hostname"),
                         "public-keys": md.get("public-keys"), "network": md.get("network")}
        keys = md.get("public-keys") or []
        self.public_keys = [str(k).strip() for k in (keys if isinstance(keys, list) else [keys]) if str(k).strip()]
        for attr, key in (("userdata_raw", "userdata"), ("vendordata_raw", "vendordata")):
            value = md.get(key)
            setattr(self, attr, value.encode("utf-8") if isinstance(value, str) and value else None)
        self.network_config = network_config(md.get("network"), system_macs())
        self.metadata_address = url
        self.raw = {k: v for k, v in md.items() if k not in ("userdata", "vendordata")}
        self.subplatform = f"metadata ({url})"
        LOG.info("NWCS: read instance %s from %s in %.2fs", instance_id, url, time.monotonic() - started)
        return True


DATASOURCE = NWCS
