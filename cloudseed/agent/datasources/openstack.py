"""OpenStack metadata service: ``http://169.254.169.254/openstack/`` over HTTP.

Waits (bounded, see ``_metadata_service``) for the version listing, picks the newest version we
understand, reads the same files as the config drive, the EC2-compatible ``meta-data`` when asked
(``datasource: OpenStack: {ec2_metadata: true}``) and the ``password`` entry. Possible only where
DMI says OpenStack (Nova product name, known chassis asset tags), or when configured explicitly.
In the local stage it is read through a temporary DHCP lease so network_data.json can be applied
before networking starts.
"""

from __future__ import annotations

import logging
import time

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import ServiceLimits, reachable, urls_from_cfg
from cloudseed.agent.datasources._openstack_common import (
    NOVA_PRODUCTS,
    OPENSTACK_ASSET_TAGS,
    MetadataError,
    fill_datasource,
    read_tree,
)
from cloudseed.clouds.openstack import CLOUD

LOG = logging.getLogger("cloudseed.datasources.openstack")

DEFAULT_URLS = CLOUD.addresses  # the wire contract: clouds/openstack.py
LISTING = CLOUD.requests["versions"].path
F = CLOUD.fields
MAX_METADATA_FILE = 16 * 1024 * 1024


class OpenStack(Datasource):
    name = "OpenStack"
    stages = (LOCAL, NETWORK)
    platform = "openstack"
    sensitive_keys = (F["admin_pass"], F["random_seed"])
    detection = (
        Dmi("product_name", *NOVA_PRODUCTS),
        Dmi("chassis_asset_tag", *OPENSTACK_ASSET_TAGS),
        Setting("metadata_urls"),
        Setting("detect", "always"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "openstack"
        self.warnings: list[str] = []
        self.metadata_address: str | None = None

    def fetch(self) -> bool:
        section = self.ctx.ds_cfg(self.name)
        limits = ServiceLimits.from_cfg(section)
        if limits.max_wait <= 0:
            LOG.info("OpenStack: max_wait is %s; not waiting for the metadata service", limits.max_wait)
            return False
        if self.ctx.stage == LOCAL and not self.identified(self.ctx):
            LOG.debug("OpenStack: platform not identified by DMI; not trying it before the network is up")
            return False
        with reachable(self.ctx, self.name) as ok:
            if not ok:
                return False
            return self._crawl(urls_from_cfg(section, DEFAULT_URLS), limits)

    def _crawl(self, urls: list[str], limits: ServiceLimits) -> bool:
        from cloudseed.core.http import FetchError, fetch, first_answer

        started = time.monotonic()
        answer = first_answer([u + LISTING for u in urls], timeout=limits.max_wait,
                              max_wait=limits.max_wait)
        if answer is None or not hasattr(answer[1], "body"):
            LOG.info("OpenStack: no metadata service answered at %s within %gs", ", ".join(urls), limits.max_wait)
            return False
        listing_url, resp = answer
        base = listing_url[: -len(LISTING)]
        self.metadata_address = base
        versions = [line.strip() for line in resp.body.decode("utf-8", "replace").splitlines() if line.strip()]
        LOG.debug("OpenStack: %s offers versions %s", base, versions)

        def read(relative: str) -> bytes | None:
            url = f"{base}/{relative}"
            try:
                return fetch(url, timeout=limits.timeout, retries=limits.retries, max_bytes=MAX_METADATA_FILE,
                             max_wait=limits.timeout * (limits.retries + 1) + 2)
            except FetchError as e:
                if e.status == 404:
                    return None
                if relative.endswith("meta_data.json"):
                    raise MetadataError(str(e)) from None
                self.warnings.append(str(e))
                return None

        tree = read_tree(read, versions, base, signatures=self.ctx.checks_signatures)
        if self.ctx.ds_cfg(self.name).get("ec2_metadata"):
            tree["ec2_metadata"] = self._ec2_metadata(base, limits)
        fill_datasource(self, tree, base)
        password = read(CLOUD.tail("password", tree["version"]))
        if password and password.strip():
            self.extra["password"] = password.decode("utf-8", "replace").strip()
        self.subplatform = f"metadata ({base})"
        LOG.info("OpenStack: read version %s from %s in %.2fs", tree["version"], base, time.monotonic() - started)
        return True

    def _ec2_metadata(self, base: str, limits: ServiceLimits) -> dict:
        from cloudseed.agent.datasources.ec2 import crawl_tree

        try:
            return crawl_tree(base, "latest/meta-data", limits, headers={})
        except Exception as e:  # optional extra: never fails the datasource
            LOG.warning("OpenStack: EC2-compatible metadata at %s unreadable: %s", base, e)
            return {}


DATASOURCE = OpenStack
