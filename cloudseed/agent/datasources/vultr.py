"""Vultr: Vultr's metadata service, ``http://169.254.169.254/v1.json``.

Possible only where DMI ``sys_vendor`` is ``Vultr``, where the kernel command line has the word
``vultr`` (bare metal), or when ``datasource: Vultr: {url: ...}`` (cloud-init's key) or
``metadata_url`` is configured. One request (with ``Metadata-Token: cloudinit`` as cloud-init
sends). Read as cloud-init 22.4 reads it: instance id ``instance-v2-id`` (``instanceid`` when
that is missing), ``hostname`` (``guest`` when empty), ``public-keys``, ``user-data`` (none when
empty), ``vendor-data`` (a list of parts: one part as it is, several as a cloud-config-archive),
the region ``region.countrycode`` else ``region.regioncode``, lower case; network config
version 1 from ``cloud_interfaces`` (named by MAC) or converted from ``interfaces`` as 22.4
converts it (Vultr's resolvers; the first NIC DHCP + SLAAC with accept-ra, the others static
with their netmask, MTU, routes; additional IPv4/IPv6 addresses; ``unconfigured`` private NICs
left out). Unlike 22.4, a MAC the system does not have keeps its place (named ``ethN``, matched
by MAC) instead of failing the datasource, and ``startup-script`` is root's only in instance
data. In the local stage the service is read through a temporary DHCP lease (Vultr has DHCP).
"""

from __future__ import annotations

import time
from typing import Any

from cloudseed.agent.datasources._facts import Cmdline, Dmi, Setting
from cloudseed.agent.datasources._metadata_service import (
    MetadataServiceDatasource,
    ServiceLimits,
    listed_keys,
    system_macs,
)
from cloudseed.clouds.vultr import CLOUD

DEFAULT_URL = CLOUD.addresses[0]  # the wire contract: clouds/vultr.py
DOCUMENT = CLOUD.requests["document"]
F = CLOUD.fields
NAMESERVERS = ["108.61.10.10", "2001:19f0:300:1704::6"]


class VultrError(Exception):
    pass


def _name(mac: str, macs: dict[str, str], index: int) -> str:
    return macs.get(mac.lower()) or f"eth{index}"


def _items(value: Any) -> list:
    return value if isinstance(value, list) else []


def _interface(raw: dict, primary: bool, macs: dict[str, str], index: int) -> dict:
    mac = str(raw.get(F["mac"]) or "")
    cfg: dict[str, Any] = {"name": _name(mac, macs, index), "type": "physical", "mac_address": mac}
    ipv4 = raw.get(F["ipv4"]) if isinstance(raw.get(F["ipv4"]), dict) else {}
    ipv6 = raw.get(F["ipv6"]) if isinstance(raw.get(F["ipv6"]), dict) else {}
    if primary:
        cfg["accept-ra"] = 1
        cfg["subnets"] = [{"type": "dhcp", "control": "auto"}, {"type": "ipv6_slaac", "control": "auto"}]
    else:
        cfg["subnets"] = [{"type": "static", "control": "auto", "address": ipv4.get(F["address"]),
                           "netmask": ipv4.get(F["netmask"])}]
    for role, key in (("mtu", "mtu"), ("accept_ra", "accept-ra")):  # network config v1's names
        if F[role] in raw:
            cfg[key] = raw[F[role]]
    if F["routes"] in raw:
        cfg["subnets"][0]["routes"] = raw[F["routes"]]
    for extra in _items(ipv4.get(F["additional"])):
        if isinstance(extra, dict):
            add = {"type": "static", "control": "auto", "address": extra.get(F["address"]),
                   "netmask": extra.get(F["netmask"])}
            if F["routes"] in extra:
                add["routes"] = extra[F["routes"]]
            cfg["subnets"].append(add)
    for extra in _items(ipv6.get(F["additional"])):
        if isinstance(extra, dict):
            add = {"type": "static6", "control": "auto",
                   "address": f"{extra.get(F['network'])}/{extra.get(F['prefix'])}"}
            if F["routes"] in extra:
                add["routes"] = extra[F["routes"]]
            cfg["subnets"].append(add)
    return cfg


def network_config(md: dict, macs: dict[str, str]) -> dict | None:
    """cloud-init 22.4's network config of a Vultr document (version 1)."""
    cloud = md.get(F["cloud_interfaces"])
    if isinstance(cloud, list):
        named = []
        for index, raw in enumerate(cloud):
            if isinstance(raw, dict):
                named.append({**raw, "name": _name(str(raw.get(F["mac"]) or ""), macs, index)})
        return {"version": 1, "config": named}
    interfaces = md.get(F["interfaces"])
    if not isinstance(interfaces, list):
        return None
    config: list[dict] = [{"type": "nameserver", "address": list(NAMESERVERS)}]
    for index, raw in enumerate(interfaces):
        if not isinstance(raw, dict) or (index > 0 and raw.get(F["unconfigured"])):
            continue
        config.append(_interface(raw, index == 0, macs, index))
    return {"version": 1, "config": config}


def vendordata(value: Any) -> bytes | None:
    """Vultr's ``vendor-data`` (a list of parts, or one text) as raw vendor-data."""
    import json

    if isinstance(value, str):
        return value.encode("utf-8") if value else None
    if not isinstance(value, list) or not value:
        return None
    parts = [p if isinstance(p, str) else "#cloud-config\n" + json.dumps(p) for p in value]
    if len(parts) == 1:
        return parts[0].encode("utf-8")
    return b"#cloud-config-archive\n" + json.dumps(parts).encode("utf-8")


class Vultr(MetadataServiceDatasource):
    name = "Vultr"
    platform = "vultr"
    sensitive_keys = (F["startup_script"],)  # the operator's script: only root reads it in instance data
    detection = (
        Dmi("sys_vendor", "Vultr"),
        Cmdline("vultr", tokens=True, why="the kernel command line has 'vultr' (bare metal)"),
        Setting("url"),
        Setting("metadata_url"),
    )
    error = VultrError

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        url = str(section.get("metadata_url") or f"{str(section.get('url') or DEFAULT_URL).rstrip('/')}{DOCUMENT.path}")
        started = time.monotonic()
        body = self.get_document(url, limits, headers=DOCUMENT.headers())
        if body is None:
            return False
        md = self.json_object(body, url)
        instance_id = md.get(F["instance_id"]) or md.get(F["instance_id_v1"])
        if isinstance(instance_id, bool) or not isinstance(instance_id, (str, int)) or instance_id == "":
            raise VultrError(f"Vultr metadata {url}: no {F['instance_id']}")
        region: Any = md.get(F["region"]) if isinstance(md.get(F["region"]), dict) else {}
        code = region.get(F["country_code"]) or region.get(F["region_code"])
        self.region = str(code).lower() if code else None
        hostname = md.get(F["hostname"])
        # as 22.4's metadata (instance data ds.meta_data): the document (user-data and vendor-data
        # apart) with instance-id, local-hostname and the region added
        self.metadata = {**{k: v for k, v in md.items() if k not in (F["user_data"], F["vendor_data"])},
                         "instance-id": str(instance_id),
                         "local-hostname": str(hostname) if hostname not in (None, "") else "guest",
                         "region": self.region}
        self.public_keys = listed_keys(md.get(F["public_keys"]))
        user = md.get(F["user_data"])
        self.userdata_raw = user.encode("utf-8") if isinstance(user, str) and user else None
        self.vendordata_raw = vendordata(md.get(F["vendor_data"]))
        if url.endswith(".json"):  # each also served as text: /v1/user-data, /v1/vendor-data
            for kind in ("user-data", "vendor-data"):
                self.served_at(kind, f"{url[:-5]}/{F[kind.replace('-', '_')]}", DOCUMENT.headers())
        self.network_config = network_config(md, system_macs())
        return self.found(url, instance_id, started)


DATASOURCE = Vultr
