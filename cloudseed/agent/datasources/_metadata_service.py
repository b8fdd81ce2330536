"""Shared by the HTTP metadata datasources (OpenStack, Ec2, GCE, DigitalOcean, Hetzner, Oracle...): time
limits, the local-stage network, the system's NICs by MAC, and
``MetadataServiceDatasource``, the one shape of a datasource that reads one such service.

Signed user-data: a datasource names where the service serves each blob it read as text
(``served_at``, the URL and the headers it was asked with); when the image checks signatures
(``trusted_userdata_keys``, ``require_signed_userdata``), ``fetch`` then reads ``URL.sig`` beside
each, while the service is still reachable, through ``signature`` (the datasource's own way of
asking, when it is not ``core.http``'s plain GET). Without those settings nothing more is done.

``datasource: <Name>: {max_wait, timeout, retries}``: ``max_wait`` bounds the wait for the
service's first answer (seconds, default 2; 0 or less: do not try), ``timeout`` bounds each later
request, ``retries`` how often a failing file is asked again. In the local stage the service is
reached through a temporary DHCP lease (``cloudseed.agent.ephemeral``), only when the platform was
positively identified and ``local`` is not false.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext

LOG = logging.getLogger("cloudseed.datasources")


@dataclass
class ServiceLimits:
    max_wait: float = 2.0
    timeout: float = 5.0
    retries: int = 2

    @classmethod
    def from_cfg(cls, section: dict[str, Any]) -> ServiceLimits:
        limits = cls()
        for key, kind in (("max_wait", float), ("timeout", float), ("retries", int)):
            if section.get(key) is None:
                continue
            try:
                setattr(limits, key, kind(section[key]))
            except (TypeError, ValueError):
                LOG.warning("datasource setting %s=%r is not a number; using %s", key, section[key],
                            getattr(limits, key))
        limits.timeout = max(0.1, limits.timeout)
        limits.retries = max(0, limits.retries)
        return limits


def urls_from_cfg(section: dict[str, Any], defaults: tuple[str, ...]) -> list[str]:
    urls = section.get("metadata_urls")
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list) or not urls:
        return list(defaults)
    return [str(u).rstrip("/") for u in urls if str(u).startswith(("http://", "https://"))] or list(defaults)


@contextlib.contextmanager
def reachable(ctx: DatasourceContext, name: str) -> Iterator[bool]:
    """Yield True while the metadata service can be tried in this stage (False: do not try)."""
    if ctx.stage != LOCAL:
        yield True
        return
    section = ctx.ds_cfg(name)
    if section.get("local") is False:
        yield False
        return
    from cloudseed.agent.ephemeral import EphemeralError, ephemeral_network

    try:
        cm = ephemeral_network(ctx.root, section.get("interface"),
                               timeout=float(section.get("dhcp_timeout", 5)))
        lease = cm.__enter__()
    except EphemeralError as e:
        LOG.warning("datasource %s: %s; leaving it to the network stage", name, e)
        yield False
        return
    LOG.debug("datasource %s: temporary network %s", name, lease)
    try:
        yield True
    finally:
        cm.__exit__(None, None, None)


def system_macs() -> dict[str, str]:
    """lowercase MAC -> interface name of the running system (loopback and zero MACs left out)."""
    found: dict[str, str] = {}
    base = "/sys/class/net"
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            with open(f"{base}/{name}/address") as f:
                mac = f.read().strip().lower()
        except OSError:
            continue
        if mac and mac != "00:00:00:00:00:00" and name != "lo":
            found.setdefault(mac, name)
    return found


MAX_DOCUMENT = 4 * 1024 * 1024


def get_signature(url: str, headers: dict[str, str], limits: ServiceLimits) -> bytes | None:
    """The signature at ``url`` asked with ``headers`` (None: not served, HTTP 404); raises
    ``FetchError`` when it cannot be read."""
    from cloudseed.core.http import FetchError, fetch
    from cloudseed.core.userdata_signatures import MAX_SIGNATURE

    try:
        return fetch(url, timeout=limits.timeout, retries=limits.retries, headers=headers, max_bytes=MAX_SIGNATURE,
                     max_wait=limits.timeout * (limits.retries + 1) + 2)
    except FetchError as e:
        if e.status == 404:
            return None
        raise


def listed_keys(value: Any) -> list[str]:
    """SSH keys given as one text or a list of them (stripped; empty ones left out)."""
    keys = value or []
    return [str(k).strip() for k in (keys if isinstance(keys, list) else [keys]) if str(k).strip()]


class MetadataServiceDatasource(Datasource):
    """A datasource reading one HTTP metadata service, in the local stage (through a temporary DHCP
    lease, only where the platform was identified) and the network stage.

    A subclass declares its ``detection`` (its DMI facts, which ``identified`` tries, then the
    settings that configure its URL, such as ``Setting("metadata_url")``: detection without DMI),
    ``read``, and may change ``stages``, ``error`` (the exception its service's failures raise),
    ``may_try`` (checks before the service is reached, without the network) and ``reach`` (how
    the service is made reachable in this stage). ``fetch``: ``max_wait`` <= 0 means do not try.
    """

    stages: ClassVar[tuple[str, ...]] = (LOCAL, NETWORK)
    error: ClassVar[type[Exception]] = ValueError

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.metadata_address: str | None = None
        # signed user-data: kind (user-data, vendor-data) -> (the URL serving that blob as text, headers)
        self.served: dict[str, tuple[str, dict[str, str]]] = {}

    def fetch(self) -> bool:
        section = self.ctx.ds_cfg(self.name)
        limits = ServiceLimits.from_cfg(section)
        if limits.max_wait <= 0 or not self.may_try(section):
            return False
        with self.reach() as ok:
            if not ok or not self.read(section, limits):
                return False
            if self.served and self.ctx.checks_signatures:
                from cloudseed.agent.userdata_trust import read_signatures

                read_signatures(self, self.served, lambda url, headers: self.signature(url, headers, limits))
            return True

    def served_at(self, kind: str, url: str, headers: dict[str, str] | None = None) -> None:
        """``kind``'s blob (``user-data``, ``vendor-data``) is served as text at ``url`` (asked with
        ``headers``): its signature is at ``url``'s path + ``.sig``. Declare it whether or not the
        image checks signatures (it costs nothing); read only when it does."""
        self.served[kind] = (url, dict(headers or {}))

    def signature(self, url: str, headers: dict[str, str], limits: ServiceLimits) -> bytes | None:
        """The signature at ``url`` (``get_signature``). A service asked another way (a privileged
        source port, per-request credentials) overrides it."""
        return get_signature(url, headers, limits)

    def may_try(self, section: dict[str, Any]) -> bool:
        """False when the service is not to be tried here (local facts only; may raise ``error``)."""
        return True

    @contextlib.contextmanager
    def reach(self) -> Iterator[bool]:
        """True while the service can be tried in this stage: in the local stage only where the
        platform was identified, through a temporary DHCP lease (``reachable``)."""
        if self.ctx.stage == LOCAL and not self.identified(self.ctx):
            yield False
            return
        with reachable(self.ctx, self.name) as ok:
            yield ok

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        """Read the service into this datasource; False when it is not there."""
        raise NotImplementedError

    def get_document(self, url: str, limits: ServiceLimits, *, retries: int | None = None,
                     headers: dict[str, str] | None = None, max_bytes: int = MAX_DOCUMENT,
                     raise_in_network: bool = True) -> bytes | None:
        """The service's first document, each try bounded by ``max_wait`` (``retries`` more tries,
        default the configured ones). None when it cannot be read in the local stage (logged: the
        network stage tries again), or in the network stage unless ``raise_in_network``: then
        ``error`` naming the URL and the failure."""
        from cloudseed.core.http import FetchError, fetch

        tries = limits.retries if retries is None else retries
        try:
            return fetch(url, timeout=limits.max_wait, retries=tries, max_bytes=max_bytes, headers=headers,
                         max_wait=limits.max_wait * (tries + 1) + 2)
        except FetchError as e:
            log = self._log()
            if self.ctx.stage == LOCAL:
                log.info("%s: %s; leaving it to the %s stage", self.name, e, NETWORK)
                return None
            if not raise_in_network:
                log.info("%s: %s", self.name, e)
                return None
            raise self.error(f"{self.name} metadata {e}") from None

    def found(self, url: str, instance_id: Any, started: float, kind: str = "instance") -> bool:
        """Note where the instance was read (``metadata_address``, ``subplatform``), log it; True."""
        self.metadata_address = url
        self.subplatform = f"metadata ({url})"
        self._log().info("%s: read %s%s from %s in %.2fs", self.name, f"{kind} " if kind else "", instance_id,
                         url, time.monotonic() - started)
        return True

    def _log(self) -> logging.Logger:
        return logging.getLogger("cloudseed.datasources." + type(self).__module__.rsplit(".", 1)[-1])

    def json_object(self, body: bytes, url: str) -> dict[str, Any]:
        """``body`` of ``url`` as a JSON object, else ``error`` saying what it is instead."""
        import json

        try:
            doc = json.loads(body.decode("utf-8", "replace"))
        except ValueError as e:
            raise self.error(f"{self.name} metadata {url}: not a JSON document ({e})") from None
        if not isinstance(doc, dict):
            raise self.error(f"{self.name} metadata {url}: expected a JSON object, got {type(doc).__name__}")
        return doc
