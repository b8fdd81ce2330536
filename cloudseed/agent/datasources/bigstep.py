"""Bigstep: one JSON document at the URL written in ``/var/lib/cloud/data/seed/bigstep/url``.

Possible only where that file exists (Bigstep's image writes it; as ds-identify checks it); the
network stage fetches the URL once and reads, as cloud-init 22.4 does, ``metadata`` (a mapping),
``userdata_raw`` and ``vendordata_raw`` (strings) from it. Unlike cloud-init, a missing key or a
document that is not JSON is an error naming the URL and the key, not a traceback.
"""

from __future__ import annotations

import logging

from cloudseed.agent.datasources import NETWORK, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import Path
from cloudseed.agent.datasources._metadata_service import ServiceLimits
from cloudseed.clouds.bigstep import CLOUD

LOG = logging.getLogger("cloudseed.datasources.bigstep")

URL_FILES = (CLOUD.names["url_file"], CLOUD.names["url_file_cloudseed"])  # the wire contract: clouds/bigstep.py
F = CLOUD.fields
DOCUMENT = CLOUD.requests["document"].fields  # metadata, user-data, vendor-data
MAX_DOCUMENT = 16 * 1024 * 1024


class BigstepError(Exception):
    """The Bigstep document is unusable; the message names the URL."""


def parse_document(body: bytes, url: str) -> dict:
    """``{"metadata", "userdata_raw", "vendordata_raw"}`` from the document at ``url``."""
    import json

    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise BigstepError(f"{url}: not a JSON document ({e})") from None
    if not isinstance(doc, dict):
        raise BigstepError(f"{url}: expected a JSON object, got {type(doc).__name__}")
    missing = [k for k in DOCUMENT if k not in doc]
    if missing:
        raise BigstepError(f"{url}: the document has no {', '.join(missing)}")
    metadata = doc[F["metadata"]]
    if not isinstance(metadata, dict):
        raise BigstepError(f"{url}: '{F['metadata']}' is {type(metadata).__name__}, not an object")
    for key in (F["user_data"], F["vendor_data"]):
        if doc[key] is not None and not isinstance(doc[key], str):
            raise BigstepError(f"{url}: {key!r} is {type(doc[key]).__name__}, not a string")
    return doc


class Bigstep(Datasource):
    name = "Bigstep"
    stages = (NETWORK,)
    platform = "bigstep"
    detection = (
        Path(*URL_FILES, kind="file"),
    )

    @classmethod
    def _url_file(cls, ctx: DatasourceContext) -> str | None:
        for path in URL_FILES:
            if ctx.root.isfile(path):
                return path
        return None

    def fetch(self) -> bool:
        from cloudseed.core.http import FetchError, fetch

        path = self._url_file(self.ctx)
        if path is None:
            return False
        url = self.ctx.root.read_text(path, default="").strip()
        if not url.startswith(("http://", "https://")):
            raise BigstepError(f"{path}: {url[:80]!r} is not an http(s) URL")
        limits = ServiceLimits.from_cfg(self.ctx.ds_cfg(self.name))
        try:
            body = fetch(url, timeout=limits.timeout, retries=limits.retries, max_bytes=MAX_DOCUMENT,
                         max_wait=limits.timeout * (limits.retries + 1) + 2)
        except FetchError as e:
            raise BigstepError(f"Bigstep metadata (URL from {path}): {e}") from None
        doc = parse_document(body, url)
        self.metadata = doc[F["metadata"]]
        user, vendor = doc[F["user_data"]], doc[F["vendor_data"]]
        self.userdata_raw = user.encode("utf-8") if user else None
        self.vendordata_raw = vendor.encode("utf-8") if vendor else None
        keys = self.metadata.get(F["public_keys"]) or []
        self.public_keys = [str(k) for k in (keys if isinstance(keys, list) else [keys]) if str(k).strip()]
        self.raw = {"meta_data": self.metadata}
        self.subplatform = f"metadata ({url})"
        return True


DATASOURCE = Bigstep
