"""Shared by the HTTP metadata datasources (OpenStack, Ec2, GCE, DigitalOcean, Hetzner, Oracle): time
limits, the local-stage network, the system's NICs by MAC, and detection by DMI or a configured URL.

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
from dataclasses import dataclass
from typing import Any, Iterator

from cloudseed.agent.datasources import LOCAL, DatasourceContext

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


def identified_or_configured(ctx: DatasourceContext, name: str, identified: Any) -> str | None:
    """Detection of a cloud's service: its DMI facts (``identified(ctx)``), or a configured metadata_url."""
    found = identified(ctx)
    if found:
        return found
    if ctx.ds_cfg(name).get("metadata_url"):
        return f"datasource.{name}.metadata_url is configured"
    return None
