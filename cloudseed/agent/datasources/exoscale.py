"""Exoscale: ``http://169.254.169.254/1.0/`` (CloudStack's tree) and the password server on port 8080.

Possible only where DMI ``product_name`` starts with ``Exoscale`` (as cloud-init 22.4 and its
ds-identify check), or when ``datasource: Exoscale: {metadata_url: ...}`` is configured. Network
stage only (as 22.4). Settings as 22.4's: ``metadata_url`` (default http://169.254.169.254),
``api_version`` (1.0), ``password_server_port`` (8080), ``timeout``, ``retries``, ``max_wait``.
Read: ``1.0/meta-data/`` and ``1.0/user-data``, then ``GET http://169.254.169.254:8080/1.0/``
with ``DomU_Request: send_my_password``; a password is acknowledged (``saved_password``) and
kept in the datasource's private ``extra`` as cloud-init's config (``password``,
``ssh_pwauth: true``, ``chpasswd.expire: false``) for ``set_passwords``, never in instance
data. A password reset from the console reaches the next boot: a password served on a later
boot makes ``set_passwords`` run again (cloud-init 22.4 runs it on every Exoscale boot).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from cloudseed.agent.datasources import NETWORK, DatasourceContext
from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import MetadataServiceDatasource, ServiceLimits
from cloudseed.clouds.exoscale import CLOUD

LOG = logging.getLogger("cloudseed.datasources.exoscale")

METADATA_URL = CLOUD.addresses[0]  # the wire contract: clouds/exoscale.py
API_VERSION = CLOUD.versions[0]
PASSWORD_PORT = int(CLOUD.names["password_port"])


class Exoscale(MetadataServiceDatasource):
    name = "Exoscale"
    stages = (NETWORK,)
    platform = "exoscale"
    detection = (
        Dmi("product_name", "Exoscale*"),
        Setting("metadata_url"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.warnings: list[str] = []

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        from urllib.parse import urlsplit

        from cloudseed.agent.datasources.cloudstack import (
            PasswordServerError,
            apply_password,
            read_password,
            read_tree,
        )
        from cloudseed.core.http import FetchError

        started = time.monotonic()
        base = str(section.get("metadata_url") or METADATA_URL).rstrip("/")
        version = str(section.get("api_version") or API_VERSION).strip("/")
        instance_id = read_tree(self, CLOUD, base, version, limits, 16 * 1024 * 1024)
        if not instance_id:
            return False
        self.metadata_address = base
        self.subplatform = f"metadata ({base})"
        self.raw["_metadata_api_version"] = version
        try:
            port = int(section.get("password_server_port", PASSWORD_PORT))
        except (TypeError, ValueError):
            LOG.warning("Exoscale: password_server_port %r is not a number; using %d",
                        section.get("password_server_port"), PASSWORD_PORT)
            port = PASSWORD_PORT
        parts = urlsplit(base)
        url = f"{parts.scheme}://{parts.hostname}:{port}/{version}/"
        try:
            password = read_password(url, limits, self.name)
        except (FetchError, PasswordServerError) as e:
            LOG.warning("Exoscale: password server: %s", e)
            self.warnings.append(f"password server: {e}")
            password = None
        if password:
            LOG.info("Exoscale: the password server at %s has a password for this instance", url)
            apply_password(self, password)
        LOG.info("Exoscale: read %s from %s in %.2fs", instance_id, base, time.monotonic() - started)
        return True


DATASOURCE = Exoscale
