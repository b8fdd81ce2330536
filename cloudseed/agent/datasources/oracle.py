"""Oracle: Oracle Cloud Infrastructure's instance metadata service (IMDS), ``/opc/v2/`` then ``/opc/v1/``.

Possible only where DMI ``chassis_asset_tag`` is ``OracleCloud.com``, or when
``datasource: Oracle: {metadata_url: ...}`` is configured. Read as cloud-init 22.4 reads it:
``instance/`` with ``Authorization: Bearer Oracle`` (v2), falling back to v1 when v2 fails; then
``vnics/`` of the same version. Instance id ``id``, hostname, availability zone ``ociAdName``,
``metadata.ssh_authorized_keys`` and ``metadata.user_data`` (base64). Network config (version 1)
as cloud-init builds it from the VNICs: the primary by DHCP and every secondary VNIC statically
(``privateIp`` with the ``subnetCidrBlock`` prefix), MTU 9000, each matched by MAC; a VNIC whose
MAC the system does not have is skipped. Unlike 22.4, when the initramfs configured the primary
NIC (iSCSI root: ``/run/net-*.cfg``, which cloud-init re-reads in klibc format) no config is
given here, so the initramfs's stays in charge of the root disk's network.
In the local stage the service is read through a temporary DHCP lease.
"""

from __future__ import annotations

import base64
import glob
import ipaddress
import json
import logging
import os
import time
from typing import Any

from cloudseed.agent.datasources import DatasourceContext
from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import MetadataServiceDatasource, ServiceLimits, system_macs
from cloudseed.clouds.oracle import CLOUD

LOG = logging.getLogger("cloudseed.datasources.oracle")

BASE_URL = CLOUD.default_url()  # the wire contract: clouds/oracle.py
V2_HEADERS = CLOUD.requests["instance"].headers()
F = CLOUD.fields
V2, V1 = CLOUD.versions  # "v2", then "v1" when v2 fails
CHASSIS_ASSET_TAG = "OracleCloud.com"
MTU = 9000
MAX_DOCUMENT = 4 * 1024 * 1024


def network_config(vnics: Any, system_macs: dict[str, str]) -> dict | None:
    """cloud-init 22.4's IMDS network config (version 1) from ``vnics``, primary set from IMDS."""
    if not isinstance(vnics, list) or not vnics:
        return None
    config = []
    for index, vnic in enumerate(vnics):
        mac = str(vnic.get(F["mac"], "")).lower()
        name = system_macs.get(mac)
        if not name:
            LOG.warning("Oracle: no interface with MAC %s here; VNIC skipped", mac)
            continue
        if index == 0:
            subnet: dict[str, Any] = {"type": "dhcp"}
        else:
            prefix = ipaddress.ip_network(vnic[F["subnet"]], strict=False).prefixlen
            subnet = {"type": "static", "address": f"{vnic[F['private_ip']]}/{prefix}"}
        config.append({"name": name, "type": "physical", "mac_address": mac, "mtu": MTU, "subnets": [subnet]})
    return {"version": 1, "config": config}




class Oracle(MetadataServiceDatasource):
    name = "Oracle"
    platform = "oracle"
    detection = (
        Dmi("chassis_asset_tag", CHASSIS_ASSET_TAG),
        Setting("metadata_url"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.imds_version = ""

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        base = str(section.get("metadata_url") or BASE_URL).rstrip("/")
        return self._read(base, limits)

    def _get(self, url: str, version: int, timeout: float, retries: int) -> Any:
        from cloudseed.core.http import fetch

        body = fetch(url, timeout=timeout, retries=retries, headers=V2_HEADERS if version > 1 else {},
                     max_bytes=MAX_DOCUMENT, max_wait=timeout * (retries + 1) + 2)
        return json.loads(body.decode("utf-8", "replace"))

    def _read(self, base: str, limits: ServiceLimits) -> bool:
        from cloudseed.core.http import FetchError

        started = time.monotonic()
        data: Any = None
        version = 2
        try:
            data = self._get(base + CLOUD.tail("instance", V2), 2, limits.max_wait, 0)
        except (FetchError, ValueError) as e:
            LOG.info("Oracle: IMDS v2 unusable (%s); trying v1", e)
            version = 1
            try:
                data = self._get(base + CLOUD.tail("instance", V1), 1, limits.max_wait, 0)
            except (FetchError, ValueError) as e1:
                LOG.info("Oracle: no metadata service at %s: %s", base, e1)
                return False
        if not isinstance(data, dict) or not data.get(F["instance_id"]):
            raise ValueError(f"{base}/v{version}/instance/: no instance id")
        iscsi = bool(glob.glob(os.path.join(self.ctx.root.top, "run", "net-*.cfg")))
        vnics = None
        if not iscsi:
            try:
                vnics = self._get(base + CLOUD.tail("vnics", f"v{version}"), version, limits.timeout, limits.retries)
            except (FetchError, ValueError) as e:
                LOG.warning("Oracle: %s/v%d/vnics/ unreadable: %s", base, version, e)
        self.imds_version = f"v{version}"
        self.metadata_address = f"{base}/v{version}/"
        meta = data.get(F["metadata"]) if isinstance(data.get(F["metadata"]), dict) else {}
        self.metadata = {"availability-zone": data.get(F["zone"]), "instance-id": str(data[F["instance_id"]]),
                         "launch-index": 0, "local-hostname": data.get(F["hostname"]),
                         "name": data.get(F["display_name"]), "public_keys": meta.get(F["ssh_keys"])}
        if meta.get(F["user_data"]):
            self.userdata_raw = base64.b64decode(meta[F["user_data"]])
            self.served_at("user-data", base + CLOUD.tail("user_data", f"v{version}"),
                           V2_HEADERS if version > 1 else {})
        keys = meta.get(F["ssh_keys"]) or []
        if isinstance(keys, str):
            keys = keys.splitlines()
        self.public_keys = [str(k).strip() for k in keys if str(k).strip() and not str(k).startswith("#")]
        self.availability_zone = str(data[F["zone"]]) if data.get(F["zone"]) else None
        self.region = str(data.get(F["canonical_region"]) or data.get(F["region"]) or "") or None
        self.network_config = None if iscsi else network_config(vnics, system_macs())
        self.raw = {"instance": {k: v for k, v in data.items() if k != F["metadata"]}, "vnics": vnics}
        self.subplatform = f"metadata ({self.metadata_address})"
        LOG.info("Oracle: read instance %s (IMDS v%d) in %.2fs", data[F["instance_id"]], version,
                 time.monotonic() - started)
        return True


DATASOURCE = Oracle
