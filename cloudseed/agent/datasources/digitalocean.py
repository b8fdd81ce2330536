"""DigitalOcean: the droplet metadata service, ``http://169.254.169.254/metadata/v1.json``.

Possible only where DMI ``sys_vendor`` is ``DigitalOcean`` (the droplet id is the DMI serial), or
when ``datasource: DigitalOcean: {metadata_url: ...}`` is configured. One request. Read as
cloud-init 22.4 reads it: instance id ``droplet_id``, hostname, ``public_keys``, the region as
availability zone, ``user_data``, ``vendor_data``; network config version 1 converted from
``interfaces`` the way cloud-init converts it (the ``public`` NIC named eth0, ``private`` eth1,
static addresses from ``ipv4``, ``ipv6``, ``anchor_ipv4``; a gateway only on the public NIC's
non-anchor subnets; ``dns.nameservers``). DigitalOcean has no DHCP: in the local stage, when the
first NIC has no IPv4 address, a random link-local address (169.254.R.R/16) is put on it while
the service is read, and removed afterwards, as cloud-init does.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from typing import Any, Iterator

from cloudseed.agent.datasources import LOCAL, DatasourceContext
from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import (
    MetadataServiceDatasource,
    ServiceLimits,
    listed_keys,
    system_macs,
)
from cloudseed.clouds.digitalocean import CLOUD

LOG = logging.getLogger("cloudseed.datasources.digitalocean")

DEFAULT_URL = CLOUD.addresses[0] + CLOUD.requests["document"].path  # the wire contract: clouds/digitalocean.py
F = CLOUD.fields
NIC_NAMES = {F["public"]: "eth0", F["private"]: "eth1"}


def _subnet(raw: dict, keep_gateway: bool) -> dict:
    address = str(raw.get(F["ip_address"]) or "")
    subnet: dict[str, Any] = {"type": "static", "control": "auto", "address": address}
    if ":" in address:
        subnet["address"] = f"{address}/{raw.get(F['cidr'])}"
    else:
        subnet["netmask"] = raw.get(F["netmask"])
    if keep_gateway and raw.get(F["gateway"]):
        subnet["gateway"] = raw.get(F["gateway"])
    return subnet


def network_config(interfaces: Any, nameservers: Any, system_macs: dict[str, str]) -> dict | None:
    """cloud-init 22.4's conversion of DO's ``interfaces`` (version 1). Unlike 22.4, a MAC the
    system does not have is kept (matched by MAC) instead of failing the whole config."""
    if not isinstance(interfaces, dict) or not interfaces:
        return None
    config: list[dict] = []
    for nics in interfaces.values():
        if not isinstance(nics, list) or not nics or not isinstance(nics[0], dict):
            continue
        nic = nics[0]
        mac = str(nic.get(F["mac"]) or "").lower()
        nic_type = nic.get(F["type"], "unknown")
        name = NIC_NAMES.get(nic_type) or system_macs.get(mac) or f"eth{len(config)}"
        subnets = [_subnet(nic[F[role]], nic_type == F["public"] and not role.startswith("anchor"))
                   for role in ("ipv4", "ipv6", "anchor_ipv4", "anchor_ipv6") if isinstance(nic.get(F[role]), dict)]
        config.append({"type": "physical", "mac_address": mac, "name": name, "subnets": subnets})
    if nameservers:
        config.append({"type": "nameserver", "address": list(nameservers)})
    return {"version": 1, "config": config}




@contextlib.contextmanager
def link_local(ctx: DatasourceContext) -> Iterator[None]:
    """A random 169.254.R.R/16 on the first NIC while the body runs, when it has no IPv4 (local stage)."""
    if ctx.stage != LOCAL:
        yield
        return
    from cloudseed.agent.ephemeral import _has_ipv4, fallback_interface

    nic = ctx.ds_cfg("DigitalOcean").get("interface") or fallback_interface(ctx.root)
    if not nic or _has_ipv4(nic):
        yield
        return
    from cloudseed.core.root import run_on_machine  # the machine's NIC, whatever the target root

    address = f"169.254.{random.randint(1, 168)}.{random.randint(0, 255)}/16"
    added = run_on_machine(["ip", "addr", "add", address, "dev", nic], timeout=10).returncode == 0
    run_on_machine(["ip", "link", "set", "dev", nic, "up"], timeout=10)
    LOG.debug("DigitalOcean: link-local %s on %s: %s", address, nic, "added" if added else "failed")
    try:
        yield
    finally:
        if added:
            run_on_machine(["ip", "addr", "del", address, "dev", nic], timeout=10)


class DigitalOcean(MetadataServiceDatasource):
    name = "DigitalOcean"
    platform = "digitalocean"
    detection = (
        Dmi("sys_vendor", "DigitalOcean"),
        Setting("metadata_url"),
    )

    @contextlib.contextmanager
    def reach(self) -> Iterator[bool]:
        """DigitalOcean has no DHCP: in the local stage a link-local address while the service is read."""
        with link_local(self.ctx):
            yield True

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        url = str(section.get("metadata_url") or DEFAULT_URL)
        started = time.monotonic()
        body = self.get_document(url, limits, raise_in_network=False)
        if body is None:
            return False
        try:
            md = json.loads(body.decode("utf-8", "replace"))
        except ValueError as e:
            raise ValueError(f"{url}: not JSON: {e}") from None
        if not isinstance(md, dict):
            raise ValueError(f"{url}: not a JSON object")
        serial = self.ctx.dmi("product_serial")
        instance_id = md.get(F["instance_id"], serial)
        self.metadata = {"instance-id": str(instance_id), "local-hostname": str(md.get(F["hostname"], instance_id)),
                         "interfaces": md.get(F["interfaces"]), "public-keys": md.get(F["public_keys"]),
                         "availability_zone": md.get(F["region"], "default")}
        self.availability_zone = str(md.get(F["region"], "default"))
        self.region = self.availability_zone
        self.public_keys = listed_keys(md.get(F["public_keys"]))
        for attr, kind in (("userdata_raw", "user_data"), ("vendordata_raw", "vendor_data")):
            value = md.get(F[kind])
            setattr(self, attr, str(value).encode("utf-8") if value else None)
            if url.endswith(".json"):  # each is also served as text: /metadata/v1/user-data, /vendor-data
                self.served_at(kind.replace("_", "-"), f"{url[:-5]}/{kind.replace('_', '-')}")
        dns = md.get(F["dns"]) if isinstance(md.get(F["dns"]), dict) else {}
        self.network_config = network_config(md.get(F["interfaces"]), dns.get(F["nameservers"]), system_macs())
        self.raw = {k: v for k, v in md.items() if k not in (F["user_data"], F["vendor_data"], F["auth_key"])}
        return self.found(url, instance_id, started, "droplet")


DATASOURCE = DigitalOcean
