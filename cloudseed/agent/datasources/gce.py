"""GCE: Google Compute Engine's metadata server (``computeMetadata/v1``, ``Metadata-Flavor: Google``).

Possible only where DMI says Google (product name ``Google Compute Engine`` or ``Google``, bios
vendor ``Google``, or a ``GoogleCloud-`` serial), or when ``datasource: GCE: {metadata_url: ...}``
is configured. Two requests: ``instance/?recursive=true`` (id, zone, hostname, attributes,
network interfaces) and ``project/attributes/?recursive=true``. What is read is what cloud-init
22.4 reads: SSH keys from the instance's ``ssh-keys`` (and legacy ``sshKeys``) attributes, plus
the project's unless the instance sets ``block-project-ssh-keys: true`` or ``sshKeys``; only
keys of the users ``cloudinit`` and the default user, unexpired (``google-ssh`` ``expireOn``).
``user-data`` (``user-data-encoding: base64`` decoded) is the user-data; the hostname is the
first label of ``instance/hostname``; the region is the zone without its last ``-part``.
Network config: DHCP on every interface, matched by MAC (GCE's network is DHCP).
The default address is 169.254.169.254, which ``metadata.google.internal`` names on GCE, so
no DNS is needed before the network is configured.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import MetadataServiceDatasource, ServiceLimits, system_macs
from cloudseed.clouds.gce import CLOUD

LOG = logging.getLogger("cloudseed.datasources.gce")

DEFAULT_URL = CLOUD.default_url()  # the wire contract is clouds/gce.py's
HEADERS = CLOUD.requests["instance"].headers()
F = CLOUD.fields  # the JSON answers' names (the tree's, camelCase) and the attributes'
MAX_DOCUMENT = 4 * 1024 * 1024
KEY_USERS = ("cloudinit",)


def _expired(key: str) -> bool:
    """A ``google-ssh {"expireOn": ...}`` key whose time has passed (as cloud-init judges it)."""
    import datetime

    parts = key.split(None, 3)
    if len(parts) < 4 or parts[2] != "google-ssh":
        return False
    try:
        expire = json.loads(parts[3]).get("expireOn")
        when = datetime.datetime.strptime(expire, "%Y-%m-%dT%H:%M:%S+0000")
    except (ValueError, TypeError, AttributeError):
        return False
    return datetime.datetime.utcnow() > when


def public_keys(instance_attrs: dict, project_attrs: dict, users: tuple[str, ...]) -> list[str]:
    """The keys cloud-init 22.4 installs: ``USER:KEY`` lines of ``users``, project keys unless blocked."""
    sources = [instance_attrs.get(F["ssh_keys_legacy"]), instance_attrs.get(F["ssh_keys"])]
    blocked = str(instance_attrs.get(F["block_project_keys"], "")).lower() == "true"
    if not blocked and not instance_attrs.get(F["ssh_keys_legacy"]):
        sources += [project_attrs.get(F["ssh_keys"]), project_attrs.get(F["ssh_keys_legacy"])]
    keys = []
    for line in "\n".join(str(s) for s in sources if s).splitlines():
        if not line or not line.isascii():
            continue
        user, sep, key = line.partition(":")
        if sep and user in users and not _expired(key):
            keys.append(key)
    return keys


def network_config(interfaces: Any, system_macs: dict[str, str]) -> dict | None:
    """Version 2: DHCPv4 on each interface, matched by MAC, named as the system names it."""
    if not isinstance(interfaces, list):
        return None
    ethernets: dict[str, Any] = {}
    for index, nic in enumerate(interfaces):
        mac = str((nic or {}).get(F["mac"]) or "").lower() if isinstance(nic, dict) else ""
        if not mac:
            continue
        name = system_macs.get(mac) or f"eth{index}"
        entry: dict[str, Any] = {"match": {"macaddress": mac}, "dhcp4": True, "set-name": name}
        if nic.get(F["mtu"]):
            entry["mtu"] = nic[F["mtu"]]
        ethernets[name] = entry
    return {"version": 2, "ethernets": ethernets} if ethernets else None




class GCE(MetadataServiceDatasource):
    name = "GCE"
    platform = "gce"
    detection = (
        Dmi("product_name", "Google Compute Engine", "Google"),
        Dmi("bios_vendor", "Google"),
        Dmi("product_serial", "GoogleCloud-*", why="DMI product_serial starts with 'GoogleCloud-'"),
        Setting("metadata_url"),
    )

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        base = str(section.get("metadata_url") or DEFAULT_URL).rstrip("/") + "/"
        return self._read(base, limits)

    def _get(self, url: str, limits: ServiceLimits, first: bool) -> Any:
        from cloudseed.core.http import FetchError, fetch

        timeout = limits.max_wait if first else limits.timeout
        try:
            body = fetch(url, timeout=timeout, retries=0 if first else limits.retries, headers=HEADERS,
                         max_bytes=MAX_DOCUMENT, max_wait=timeout * (limits.retries + 1) + 2)
        except FetchError as e:
            if first:
                LOG.info("GCE: no metadata server at %s: %s", url, e)
                return None
            if e.status == 404:
                return {}
            raise
        try:
            return json.loads(body.decode("utf-8", "replace"))
        except ValueError as e:
            raise ValueError(f"{url}: not JSON: {e}") from None

    def _read(self, base: str, limits: ServiceLimits) -> bool:
        started = time.monotonic()
        instance = self._get(base + CLOUD.tail("instance"), limits, first=True)
        if not isinstance(instance, dict):
            return False
        project = self._get(base + CLOUD.tail("project"), limits, first=False)
        project = project if isinstance(project, dict) else {}
        for key in (F["instance_id"], F["zone"], F["hostname"]):
            if instance.get(key) in (None, ""):
                LOG.warning("GCE: %sinstance/%s is missing; not GCE", base, key)
                return False
        attrs = instance.get(F["attributes"]) if isinstance(instance.get(F["attributes"]), dict) else {}
        zone = str(instance[F["zone"]]).rsplit("/", 1)[-1]
        self.availability_zone = zone
        self.region = zone.rsplit("-", 1)[0]
        hostname = str(instance[F["hostname"]])
        default_user = ((self.ctx.cfg.get("system_info") or {}).get("default_user") or {}).get("name")
        users = KEY_USERS + ((str(default_user),) if default_user else ())
        self.public_keys = public_keys(attrs, project, users)
        self.metadata = {"instance-id": str(instance[F["instance_id"]]), "availability-zone": zone,
                         "local-hostname": hostname.split(".")[0], "hostname": hostname,
                         "region": self.region, "instance-data": attrs, "project-data": project,
                         "public-keys-data": [k for k in self.public_keys]}
        if F["user_data"] in attrs:
            data = str(attrs[F["user_data"]]).encode("utf-8")
            encoding = attrs.get(F["user_data_encoding"])
            if encoding == "base64":
                import base64

                data = base64.b64decode(data)
            elif encoding:
                LOG.warning("GCE: unknown user-data-encoding %r; user-data used as it is", encoding)
            self.userdata_raw = data
            self.served_at("user-data", base + CLOUD.tail("user_data"), HEADERS)
        self.network_config = network_config(instance.get(F["network_interfaces"]), system_macs())
        self.raw = {"instance": instance, "project": {F["attributes"]: project}}
        return self.found(base, instance[F["instance_id"]], started)


DATASOURCE = GCE
