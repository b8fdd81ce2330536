"""Akamai (Linode): the Metadata service at ``http://169.254.169.254/v1`` and ``http://[fd00:a9fe:a9fe::1]/v1``.

Not in cloud-init 22.4; based on Akamai's published Metadata service API reference and cloud-init
23.4's DataSourceAkamai. Possible only where DMI ``sys_vendor`` is ``Linode`` or ``Akamai`` (or
``datasource: Akamai: {metadata_url: ...}`` is configured). ``PUT /v1/token`` (with
``Metadata-Token-Expiry-Seconds``) is sent to the IPv4 and the IPv6 address side by side and the
first to answer is used for ``GET /v1/instance``, ``/v1/ssh-keys`` and ``/v1/network`` (JSON) and
``/v1/user-data`` (base64, decoded), each with the ``Metadata-Token`` header. Identity: ``id``
(the DMI serial too), ``label`` as hostname, ``region``; keys: every user's from ``ssh-keys``.
Network config: none (the fallback, DHCP on the first NIC), as cloud-init 23.4; the network
document is kept in the instance data. Settings as cloud-init's: ``allow_local_stage``,
``allow_init_stage``, ``allow_ipv4``, ``allow_ipv6`` (also from the DMI baseboard serial's
``als=``/``ais=``/``v4=``/``v6=`` flags). In the local stage the service is read through a
temporary DHCP lease. Deliberate difference from 23.4: when the service cannot be read the
datasource is not found (23.4 accepts DMI-only data, marking the instance provisioned without
its user-data).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from cloudseed.agent.datasources import LOCAL, NETWORK, DatasourceContext
from cloudseed.agent.datasources._facts import Dmi, Setting
from cloudseed.agent.datasources._metadata_service import MetadataServiceDatasource, ServiceLimits
from cloudseed.clouds.akamai import CLOUD

LOG = logging.getLogger("cloudseed.datasources.akamai")

BASE_URLS = CLOUD.addresses  # the wire contract: clouds/akamai.py
MAX_DOCUMENT = 4 * 1024 * 1024
TOKEN = CLOUD.requests["token"]
F = CLOUD.fields
DOCUMENTS = ("instance", "ssh_keys", "network")  # roles of the contract's requests
DMI_FLAGS = {"als": "allow_local_stage", "ais": "allow_init_stage", "v4": "allow_ipv4", "v6": "allow_ipv6"}


def settings(ctx: DatasourceContext, section: dict) -> dict[str, bool]:
    """allow_* switches: configuration first, then the platform's DMI flags, default True."""
    found = {key: True for key in DMI_FLAGS.values()}
    for key, value, _ in re.findall(r"([a-z0-9]+)=(.*?)(;|$)", ctx.dmi("baseboard_serial")):
        if key in DMI_FLAGS and value in ("0", "1"):
            found[DMI_FLAGS[key]] = value == "1"
    for key in found:
        if isinstance(section.get(key), bool):
            found[key] = section[key]
    return found


def bases(section: dict, allowed: dict[str, bool]) -> list[str]:
    """The service's addresses to try: the configured one, else those of the allowed IP versions."""
    configured = section.get("metadata_url")
    if configured:
        return [str(configured).rstrip("/")]
    return [b for b, ok in zip(BASE_URLS, (allowed["allow_ipv4"], allowed["allow_ipv6"])) if ok]


class Akamai(MetadataServiceDatasource):
    name = "Akamai"
    platform = "akamai"
    detection = (
        Dmi("sys_vendor", "Linode", "Akamai"),
        Setting("metadata_url"),
    )

    def may_try(self, section: dict[str, Any]) -> bool:
        allowed = settings(self.ctx, section)
        if self.ctx.stage == LOCAL and not (self.identified(self.ctx) and allowed["allow_local_stage"]):
            return False
        if self.ctx.stage == NETWORK and not allowed["allow_init_stage"]:
            return False
        if not bases(section, allowed):
            LOG.info("Akamai: configuration allows neither IPv4 nor IPv6")
            return False
        return True

    def read(self, section: dict[str, Any], limits: ServiceLimits) -> bool:
        import base64
        import binascii
        import json

        from cloudseed.core.http import FetchError, fetch, first_answer

        started = time.monotonic()
        addresses = bases(section, settings(self.ctx, section))
        answer = first_answer([b + TOKEN.path for b in addresses], method=TOKEN.method, headers=TOKEN.headers(),
                              timeout=limits.max_wait, max_wait=limits.max_wait, max_bytes=4096,
                              accept=lambda e: e.status in (400, 401, 403, 404, 405))
        if answer is None:
            LOG.info("Akamai: no answer from %s within %gs", " or ".join(addresses), limits.max_wait)
            return False
        token_url, response = answer
        if isinstance(response, FetchError):
            raise ValueError(f"Akamai: the metadata token was refused: {response}")
        token = response.body.decode("ascii", "replace").strip()
        if not token or len(token) > 1024 or not token.isprintable() or token.startswith(("[", "{")):
            raise ValueError(f"{token_url}: not a metadata token ({token[:40]!r})")
        base = token_url[:-len(TOKEN.path)]
        docs: dict[str, Any] = {}
        for name in DOCUMENTS:
            url = base + CLOUD.requests[name].path
            body = fetch(url, timeout=limits.timeout, retries=limits.retries, max_bytes=MAX_DOCUMENT,
                         headers=CLOUD.requests[name].headers(token),
                         max_wait=limits.timeout * (limits.retries + 1) + 2)
            try:
                docs[name] = json.loads(body.decode("utf-8", "replace"))
            except ValueError as e:
                raise ValueError(f"{url}: not JSON ({e})") from None
            if not isinstance(docs[name], dict):
                raise ValueError(f"{url}: not a JSON object")
        asked = CLOUD.requests["user_data"]
        userdata_url, userdata_headers = base + asked.path, asked.headers(token)
        userdata = fetch(userdata_url, timeout=limits.timeout, retries=limits.retries,
                         max_bytes=MAX_DOCUMENT, headers=userdata_headers,
                         max_wait=limits.timeout * (limits.retries + 1) + 2)
        md = docs["instance"]
        if md.get(F["instance_id"]) in (None, ""):
            raise ValueError(f"{base}{CLOUD.requests['instance'].path}: not a Linode instance document (no id)")
        instance_id = str(md[F["instance_id"]])
        self.metadata = {"instance-id": instance_id, "local-hostname": str(md.get(F["label"]) or instance_id)}
        users = docs["ssh_keys"].get(F["users"])
        keys: list[str] = []
        for user_keys in (users.values() if isinstance(users, dict) else []):
            for key in user_keys if isinstance(user_keys, list) else [user_keys]:
                if isinstance(key, str) and key.strip() and key.strip() not in keys:
                    keys.append(key.strip())
        self.public_keys = keys
        if userdata.strip():
            self.served_at("user-data", userdata_url, userdata_headers)
            try:
                self.userdata_raw = base64.b64decode(userdata.strip(), validate=True)
            except (binascii.Error, ValueError):
                LOG.warning("Akamai: user-data from %s is not base64; used as given", userdata_url)
                self.userdata_raw = userdata
        self.region = str(md[F["region"]]) if md.get(F["region"]) else None
        self.network_config = None  # the fallback (DHCP), as cloud-init 23.4
        self.raw = {"instance": md, "network": docs["network"], "ssh-keys": docs["ssh_keys"]}
        return self.found(base, instance_id, started, "Linode")


DATASOURCE = Akamai
