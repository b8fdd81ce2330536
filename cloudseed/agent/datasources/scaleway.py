"""Scaleway: the instance metadata service, ``http://169.254.42.42/conf?format=json``.

Possible only where DMI ``sys_vendor`` is ``Scaleway``, ``/var/run/scaleway`` exists (made by
Scaleway's initrd), ``scaleway`` is on the kernel command line, or ``datasource: Scaleway:
{metadata_url: ...}`` is configured. Read as cloud-init 22.4 reads it: instance id ``id``,
``hostname``, keys from ``ssh_public_keys`` and ``AUTHORIZED_KEY=<key with _ for spaces>`` tags,
network config version 1 (DHCPv4 on the fallback NIC, plus the ``ipv6`` address statically with
its gateway as default route). User-data (``/user_data/cloud-init``) and vendor-data
(``/vendor_data/cloud-init``) are served only to a privileged source port (< 1024, proof of
root): the request binds one, trying the next port when one is in use; 404 means none.
Deliberate differences from 22.4: tag keys are the text after ``AUTHORIZED_KEY=`` (22.4 keeps the
prefix instead, a bug); region and availability zone come from ``zone`` (22.4 reports none); the
NIC is also matched by its MAC. In the local stage the service is read through a temporary DHCP
lease.
"""

from __future__ import annotations

import errno
import time
from typing import Any

from cloudseed.agent.datasources import DatasourceContext
from cloudseed.agent.datasources._facts import Cmdline, Dmi, Path, Setting
from cloudseed.agent.datasources._metadata_service import MetadataServiceDatasource, ServiceLimits
from cloudseed.clouds.scaleway import CLOUD

BASE_URL = CLOUD.addresses[0]  # the wire contract: clouds/scaleway.py
MAX_DOCUMENT = 4 * 1024 * 1024
KEY_TAG = CLOUD.names["key_tag"]
F = CLOUD.fields
FIRST_PORT = 1
PORT_ATTEMPTS = 20


class PortRefused(Exception):
    """The service refused the request (403): not from a privileged port, or not root."""


def privileged_get(url: str, timeout: float, max_bytes: int = MAX_DOCUMENT) -> bytes | None:
    """GET ``url`` from a privileged source port (< 1024); None on 404. Ports in use are skipped;
    the whole exchange is bounded by ``timeout`` seconds. Raises OSError/ValueError/PortRefused."""
    import http.client
    import socket
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    deadline = time.monotonic() + timeout
    last: OSError | None = None
    for source_port in range(FIRST_PORT, FIRST_PORT + PORT_ATTEMPTS):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", source_port))
            sock.settimeout(left)
            sock.connect((host, port))
        except OSError as e:
            sock.close()
            if e.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                last = e
                continue
            raise
        conn = http.client.HTTPConnection(host, port)
        conn.sock = sock
        try:
            conn.request("GET", path, headers={"User-Agent": "cloudseed", "Accept-Encoding": "identity"})
            response = conn.getresponse()
            if response.status == 404:
                return None
            if response.status == 403:
                raise PortRefused(f"{url}: HTTP 403 from source port {source_port}: "
                                  f"{response.read(200).decode('utf-8', 'replace').strip()}")
            if response.status != 200:
                raise ValueError(f"{url}: HTTP {response.status} {response.reason}")
            chunks, size = [], 0
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{url}: no complete answer within {timeout:g}s")
                sock.settimeout(left)
                chunk = response.read1(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise ValueError(f"{url}: larger than the limit of {max_bytes} bytes")
                chunks.append(chunk)
            return b"".join(chunks)
        except http.client.HTTPException as e:
            raise ValueError(f"{url}: bad HTTP response ({type(e).__name__}: {e})") from None
        finally:
            conn.close()
    raise last or TimeoutError(f"{url}: no privileged source port could be used within {timeout:g}s")


def public_keys(md: dict) -> list[str]:
    keys = []
    for entry in md.get(F["ssh_public_keys"]) or []:
        key = entry.get(F["key"]) if isinstance(entry, dict) else None
        if isinstance(key, str) and key.strip():
            keys.append(key.strip())
    for tag in md.get(F["tags"]) or []:
        if isinstance(tag, str) and tag.startswith(KEY_TAG) and tag[len(KEY_TAG):].strip():
            keys.append(tag[len(KEY_TAG):].replace("_", " ").strip())
    return keys


def network_config(md: dict, nic: str, mac: str | None) -> dict:
    """cloud-init 22.4's: DHCPv4 on the NIC, the IPv6 address static with a default route."""
    physical: dict[str, Any] = {"type": "physical", "name": nic}
    if mac:
        physical["mac_address"] = mac
    subnets: list[dict] = [{"type": "dhcp4"}]
    v6 = md.get(F["ipv6"])
    if isinstance(v6, dict) and v6.get(F["address"]):
        subnets.append({"type": "static", "address": str(v6[F["address"]]), "netmask": str(v6.get(F["netmask"], "64")),
                        "routes": [{"network": "::", "prefix": "0", "gateway": str(v6.get(F["gateway"], ""))}]})
    physical["subnets"] = subnets
    return {"version": 1, "config": [physical]}


def _nic(ctx: DatasourceContext) -> tuple[str, str | None]:
    from cloudseed.agent.datasources._metadata_service import system_macs
    from cloudseed.network.fallback import choose_fallback_nic

    chosen = choose_fallback_nic(ctx.root)
    if chosen is not None:
        return chosen.name, chosen.mac
    for mac, name in system_macs().items():
        return name, mac
    return "eth0", None


class Scaleway(MetadataServiceDatasource):
    name = "Scaleway"
    platform = "scaleway"
    detection = (
        Dmi("sys_vendor", "Scaleway"),
        Path("/var/run/scaleway"),  # made by the initrd
        Cmdline("*scaleway*", why="'scaleway' is on the kernel command line"),
        Setting("metadata_url"),
    )

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        import json

        urls = {kind: str(section.get(f"{kind}_url") or BASE_URL + CLOUD.requests[role].target())
                for kind, role in (("metadata", "conf"), ("userdata", "user_data"), ("vendordata", "vendor_data"))}
        started = time.monotonic()
        md_url = urls["metadata"]
        body = self.get_document(md_url, limits, retries=0, raise_in_network=False)
        if body is None:
            return False
        try:
            md: Any = json.loads(body.decode("utf-8", "replace"))
        except ValueError as e:
            raise ValueError(f"{md_url}: not JSON ({e})") from None
        if not isinstance(md, dict) or md.get(F["instance_id"]) in (None, ""):
            raise ValueError(f"{md_url}: not a Scaleway server document (no id)")
        data = {}
        for kind in ("userdata", "vendordata"):
            budget = limits.timeout * (limits.retries + 1)
            try:
                data[kind] = privileged_get(urls[kind], budget)
            except PortRefused as e:
                raise ValueError(f"Scaleway refused {kind} ({e}); it is only served to root "
                                 f"(a privileged source port)") from None
            except (OSError, ValueError) as e:
                raise ValueError(f"Scaleway: {kind} from {urls[kind]} could not be read: {e}") from None
        instance_id = str(md[F["instance_id"]])
        hostname = str(md.get(F["hostname"]) or md.get(F["name"]) or instance_id)
        self.metadata = {"instance-id": instance_id, "local-hostname": hostname}
        self.public_keys = public_keys(md)
        self.userdata_raw = data["userdata"]
        self.vendordata_raw = data["vendordata"]
        self.served_at("user-data", urls["userdata"])
        self.served_at("vendor-data", urls["vendordata"])
        nic, mac = _nic(self.ctx)
        self.network_config = network_config(md, nic, mac)
        location = md.get(F["location"])
        zone = md.get(F["zone"]) or (location.get(F["zone_id"]) if isinstance(location, dict) else None)
        if isinstance(zone, str) and zone:
            self.availability_zone = zone
            self.region = zone.rsplit("-", 1)[0] if zone.count("-") >= 2 else zone
        self.raw = md
        return self.found(md_url, instance_id, started, "server")

    def signature(self, url: str, headers: dict[str, str], limits: ServiceLimits) -> bytes | None:
        """Beside user-data and vendor-data, from a privileged source port as they are."""
        return privileged_get(url, limits.timeout * (limits.retries + 1))


DATASOURCE = Scaleway
