"""An instance as Google Compute Engine's metadata server describes it: the ``computeMetadata/v1`` tree.

The tree uses the path names (``machine-type``, ``network-interfaces``); ``as_json`` turns it
into the JSON the server answers to ``?recursive=true`` (camelCase keys, as GCE's, attribute
names kept as written). Settings come from ``record.clouds["gce"]``; what is not given is derived:
user-data and the record's SSH keys (as ``cloudinit:KEY``, the user cloud-init installs) become
instance attributes unless the operator set those attributes. Service accounts: the record's
``service_accounts`` (the first is ``default``), else the project's default compute account
(``NUMBER-compute@developer.gserviceaccount.com``, scope ``cloud-platform``); ``[]`` gives none.
Their tokens and identity tokens are live answers (``provider/server/credentials/gce_credentials.py``).
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Any

from cloudseed.clouds.gce import ATTRIBUTES as A
from cloudseed.clouds.gce import KEPT_NAMES, json_name
from cloudseed.clouds.gce import PATH_NAMES as P
from cloudseed.provider.instance_data.network import interfaces
from cloudseed.provider.registry import InstanceRecord

Tree = dict[str, Any]


def _number(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("/".join(parts).encode()).digest()[:7], "big")


def project_id(record: InstanceRecord) -> str:
    return record.clouds.get("gce", {}).get("project_id") or record.project_id or "cloudseed-project"


DEFAULT_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
UNIVERSE_DOMAIN = "googleapis.com"


def project_number(record: InstanceRecord) -> int:
    return record.clouds.get("gce", {}).get("numeric_project_id") or _number("project", project_id(record))


def service_accounts(record: InstanceRecord) -> list[dict[str, Any]]:
    """``[{"email", "scopes", "aliases"}]``: the instance's service accounts, ``default`` first."""
    given = record.clouds.get("gce", {}).get("service_accounts")
    if given is None:
        given = [{"email": f"{project_number(record)}-compute@developer.gserviceaccount.com"}]
    found = []
    for index, account in enumerate(given):
        found.append({"aliases": ["default"] if index == 0 else [], "email": account["email"],
                      "scopes": list(account.get("scopes") or DEFAULT_SCOPES)})
    return found


def unique_id(email: str) -> str:
    """A service account's 21-digit unique id (the ``sub`` and ``azp`` of its identity tokens)."""
    return "1" + str(_number("service-account", email) * 1000 + _number("sa2", email) % 1000).zfill(20)[-20:]


def numeric_id(record: InstanceRecord) -> int:
    """The instance's number (``instance/id``): ``clouds.gce.numeric_id``, the record's id when it is
    a number, else derived from it."""
    instance_id = record.instance_id
    configured = record.clouds.get("gce", {}).get("numeric_id")
    return configured or (int(instance_id) if instance_id.isdigit() else _number("instance", instance_id))


def guest_instance_id(record: InstanceRecord) -> str:
    """The instance-id this cloud's guest reads (what a user-data signature served here covers)."""
    return str(numeric_id(record))


def tree(record: InstanceRecord) -> Tree:
    """``{"instance": {...}, "project": {...}}`` for ``record``."""
    gce = record.clouds.get("gce", {})
    project = project_id(record)
    number = project_number(record)
    zone = record.availability_zone
    hostname = record.hostname if "." in record.hostname else f"{record.hostname}.{zone}.c.{project}.internal"
    attributes = dict(gce.get("attributes") or {})
    if record.user_data is not None and A["user_data"] not in attributes:
        try:
            attributes[A["user_data"]] = record.user_data.decode("utf-8")
        except UnicodeDecodeError:
            import base64

            attributes[A["user_data"]] = base64.b64encode(record.user_data).decode("ascii")
            attributes[A["user_data_encoding"]] = "base64"
    if record.ssh_keys and A["ssh_keys"] not in attributes:
        attributes[A["ssh_keys"]] = "\n".join(f"cloudinit:{key['data']}" for key in record.ssh_keys)
    numeric = numeric_id(record)
    accounts = service_accounts(record)
    instance: Tree = {
        P["attributes"]: attributes,
        "cpu-platform": "Intel Broadwell",
        "description": "",
        P["hostname"]: hostname,
        P["instance_id"]: numeric,
        "image": f"projects/{project}/global/images/{record.ami_id}",
        P["machine_type"]: f"projects/{number}/machineTypes/{gce.get('machine_type') or record.instance_type}",
        "maintenance-event": "NONE",
        "name": record.name,
        P["network_interfaces"]: _interfaces(record, number),
        "preempted": "FALSE",
        "scheduling": {"automatic-restart": "TRUE", "on-host-maintenance": "MIGRATE", "preemptible": "FALSE"},
        P["service_accounts"]: {**({"default": accounts[0]} if accounts else {}), **{a["email"]: a for a in accounts}},
        "tags": list(gce.get("tags") or []),
        P["zone"]: f"projects/{number}/zones/{zone}",
    }
    return {"instance": instance,
            "project": {P["attributes"]: dict(gce.get("project_attributes") or {}),
                        P["numeric_project_id"]: number, P["project_id"]: project},
            "universe": {"universe-domain": UNIVERSE_DOMAIN}}


def _interfaces(record: InstanceRecord, number: int) -> list[Tree]:
    result = []
    for mac, addresses in interfaces(record):
        private = [a for a in addresses if not a.get("public") and ":" not in a["address"]]
        public = [a for a in addresses if a.get("public") and ":" not in a["address"]]
        nic: Tree = {"access-configs": [{"external-ip": a["address"], "type": "ONE_TO_ONE_NAT"} for a in public],
                     "dns-servers": ["169.254.169.254"], "forwarded-ips": [], P["mac"]: mac, P["mtu"]: 1460}
        if private:
            first = private[0]
            net = ipaddress.ip_interface(f"{first['address']}/{first.get('prefix', 32)}").network
            nic.update({"ip": first["address"], "subnetmask": str(net.netmask),
                        "gateway": str(next(net.hosts(), net.network_address)) if net.prefixlen < 31
                        else first["address"],
                        "network": f"projects/{number}/networks/{first['network']}"})
        result.append(nic)
    return result


def as_json(value: Any, under_attributes: bool = False) -> Any:
    """The value as GCE's JSON answers show it: keys by the contract's rule (``clouds/gce.py``'s
    ``json_name``, camelCase) outside the directories whose entries keep their names (``KEPT_NAMES``)."""
    if isinstance(value, dict):
        return {(key if under_attributes else json_name(key)):
                as_json(item, key in KEPT_NAMES and not under_attributes)
                for key, item in value.items()}
    if isinstance(value, list):
        return [as_json(item) for item in value]
    return value
