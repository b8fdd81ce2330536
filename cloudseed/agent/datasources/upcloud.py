"""UpCloud: UpCloud's metadata service, ``http://169.254.169.254/metadata/v1.json``.

Possible only where DMI ``sys_vendor`` is ``UpCloud`` (the server UUID is the DMI system UUID,
``product_uuid``), or when ``datasource: UpCloud: {metadata_url: ...}`` is configured. One
request. Read as cloud-init 22.4 reads it: instance id ``instance_id`` (else the DMI UUID),
``hostname``, ``public_keys``, ``user_data``, ``vendor_data``, availability zone ``region``
(``default`` when missing; also the region here, where 22.4 has none), and network config
version 1 converted from ``network`` as 22.4 converts it: per interface its addresses, DHCP
ones as ``dhcp`` (IPv6: ``ipv6_dhcpv6-stateless``), others ``static``/``static6`` with gateway,
the network's prefix as netmask, and their own resolvers when they differ from ``network.dns``;
then one nameserver entry with ``network.dns``. Unlike 22.4, a MAC the system does not have
keeps its place (named ``ethN``, matched by MAC) instead of failing. In the local stage the
service is read through a temporary DHCP lease (UpCloud has DHCP), as 22.4's UpCloudLocal does.
"""

from __future__ import annotations

import time
from typing import Any

from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import (
    MetadataServiceDatasource,
    ServiceLimits,
    listed_keys,
    system_macs,
)
from cloudseed.clouds.upcloud import CLOUD

DEFAULT_URL = CLOUD.addresses[0] + CLOUD.requests["document"].path  # the wire contract: clouds/upcloud.py
F = CLOUD.fields


class UpCloudError(Exception):
    pass


def _subnet(address: dict, dns: Any) -> dict:
    v6 = address.get(F["family"]) == F["ipv6_family"]
    if address.get(F["dhcp"]):
        return {"type": "ipv6_dhcpv6-stateless" if v6 else "dhcp"}
    subnet: dict[str, Any] = {"type": "static6" if v6 else "static", "control": "auto",
                              "address": address.get(F["address"])}
    if address.get(F["gateway"]):
        subnet["gateway"] = address[F["gateway"]]
    network = address.get(F["address_network"])
    if isinstance(network, str) and "/" in network:
        subnet["netmask"] = network.split("/")[1]
    if address.get(F["dns"]) and address.get(F["dns"]) != dns:
        subnet["dns_nameservers"] = address[F["dns"]]
    return subnet


def network_config(network: Any, macs: dict[str, str]) -> dict | None:
    """cloud-init 22.4's conversion of UpCloud's ``network`` (version 1)."""
    if not isinstance(network, dict) or not isinstance(network.get(F["interfaces"]), list):
        return None
    dns = network.get(F["dns"])
    config: list[dict] = []
    for index, raw in enumerate(network[F["interfaces"]]):
        if not isinstance(raw, dict):
            continue
        mac = str(raw.get(F["mac"]) or "")
        addresses = raw.get(F["ip_addresses"]) if isinstance(raw.get(F["ip_addresses"]), list) else []
        config.append({"type": "physical", "name": macs.get(mac.lower()) or f"eth{index}", "mac_address": mac,
                       "subnets": [_subnet(a, dns) for a in addresses if isinstance(a, dict)]})
    if dns:
        config.append({"type": "nameserver", "address": dns})
    return {"version": 1, "config": config}


class UpCloud(MetadataServiceDatasource):
    name = "UpCloud"
    platform = "upcloud"
    detection = (
        Dmi("sys_vendor", "UpCloud"),
        Setting("metadata_url"),
    )
    error = UpCloudError

    def may_try(self, section: dict[str, Any]) -> bool:
        if self.identified(self.ctx) and not self.ctx.dmi("product_uuid"):
            raise UpCloudError("DMI says UpCloud but gives no system UUID (/sys/class/dmi/id/product_uuid)")
        return True

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        server_uuid = self.ctx.dmi("product_uuid")
        url = str(section.get("metadata_url") or DEFAULT_URL)
        started = time.monotonic()
        body = self.get_document(url, limits)
        if body is None:
            return False
        md = self.json_object(body, url)
        instance_id = md.get(F["instance_id"], server_uuid)
        if isinstance(instance_id, bool) or not isinstance(instance_id, (str, int)) or instance_id == "":
            raise UpCloudError(f"UpCloud metadata {url}: no instance_id")
        zone = md.get(F["region"], "default")
        self.availability_zone = self.region = str(zone) if zone else None
        self.metadata = {"instance-id": str(instance_id), "local-hostname": md.get(F["hostname"]),
                         "network": md.get(F["network"]), "public-keys": md.get(F["public_keys"]),
                         "availability_zone": zone}
        self.public_keys = listed_keys(md.get(F["public_keys"]))
        for attr, kind in (("userdata_raw", "user-data"), ("vendordata_raw", "vendor-data")):
            key = F[kind.replace("-", "_")]
            value = md.get(key)
            setattr(self, attr, value.encode("utf-8") if isinstance(value, str) and value else None)
            if url.endswith(".json"):  # each is also served as text: /metadata/v1/user_data, /vendor_data
                self.served_at(kind, f"{url[:-5]}/{key}")
        self.network_config = network_config(md.get(F["network"]), system_macs())
        self.raw = {k: v for k, v in md.items() if k not in (F["user_data"], F["vendor_data"])}
        return self.found(url, instance_id, started, "server")


DATASOURCE = UpCloud
