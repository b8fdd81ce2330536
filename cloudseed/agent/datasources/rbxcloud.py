"""RbxCloud (Rootbox / HyperOne): a disk labelled ``CLOUDMD`` or ``cloudmd`` with ``cloud.json`` and
``user.data``.

Read in userspace (FAT, as RbxCloud writes it, or ISO 9660; nothing mounted), as cloud-init 22.4
reads it: ``vm._id`` is the instance id, ``vm.name`` the hostname; ``netadp`` (each with
``macaddress``, ``ip[].address``, ``network.{netmask, gateway, dns.nameservers}``) becomes network
config v1 (``eth<i>`` by MAC, static subnets); ``additionalMetadata.{username, sshKeys,
password.sha512}`` becomes the default user (passwordless sudo, the SHA-512 hash as its password,
SSH keys), with ``ssh_pwauth`` on, ``disable_root`` and ``manage_etc_hosts`` when the root has no
/etc/hosts. That config goes to the datasource's private ``extra`` (root-only instance data).
Not done: cloud-init's gratuitous ARP (``arping -c 2`` from each address to its gateway +0, +2,
+3 on every boot): it only refreshes the provider's switches, costs up to seconds of boot time per
address, and needs a tool minimal images lack; the NIC's first DHCP/ARP traffic does the same.
"""

from __future__ import annotations

import logging

from cloudseed.agent.datasources import LOCAL, Datasource
from cloudseed.agent.datasources._facts import Disk
from cloudseed.clouds.rbxcloud import CLOUD

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.datasources.rbxcloud")

LABELS = CLOUD.addresses  # the wire contract: clouds/rbxcloud.py
F = CLOUD.fields
METADATA, USERDATA = CLOUD.requests["meta_data"].path, CLOUD.requests["user_data"].path


class RbxError(Exception):
    """cloud.json is unusable; the message names the device and the key."""


def network_config(netadps: list, where: str) -> dict[str, Any]:
    """Network config v1 for the ``netadp`` list, as cloud-init builds it."""
    config = []
    try:
        for i, adp in enumerate(netadps):
            net = adp[F["network"]]
            config.append({
                "type": "physical", "name": f"eth{i}", "mac_address": str(adp[F["mac"]]).lower(),
                "subnets": [{"type": "static", "address": ip[F["address"]], "netmask": net[F["netmask"]],
                             "control": "auto", "gateway": net[F["gateway"]],
                             "dns_nameservers": net[F["dns"]][F["nameservers"]]} for ip in adp[F["ips"]]],
            })
    except (KeyError, TypeError) as e:
        raise RbxError(f"{where}/{METADATA}: {F['adapters']}[{len(config)}] lacks {e}") from None
    return {"version": 1, "config": config}


def read_dir(top: str, where: str, etc_hosts_exists: bool) -> dict[str, Any] | None:
    """``{"metadata", "userdata", "network_config", "cfg"}`` from the files in ``top``; None without
    cloud.json."""
    import json

    from cloudseed.agent.datasources._disk_image import read_file

    raw = read_file(top, METADATA)
    if raw is None:
        return None
    where = f"{where}/{METADATA}"
    try:
        md = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise RbxError(f"{where}: not JSON ({e})") from None
    if not isinstance(md, dict) or F["vm"] not in md or F["adapters"] not in md:
        raise RbxError(f"{where}: no '{F['vm']}' or no '{F['adapters']}' (not RbxCloud metadata)")
    vm, netadps = md[F["vm"]], md[F["adapters"]]
    if not isinstance(vm, dict) or F["instance_id"] not in vm or F["name"] not in vm:
        raise RbxError(f"{where}: '{F['vm']}' lacks '{F['instance_id']}' or '{F['name']}'")
    if not isinstance(netadps, list):
        raise RbxError(f"{where}: '{F['adapters']}' is not a list")
    extra = md.get(F["extra"]) or {}
    if not isinstance(extra, dict):
        raise RbxError(f"{where}: '{F['extra']}' is not an object")
    username = extra.get(F["username"])
    password = extra.get(F["password"])
    hashed = password.get(F["sha512"]) if isinstance(password, dict) else None
    user = {"name": username, "gecos": username, "sudo": ["ALL=(ALL) NOPASSWD:ALL"], "passwd": hashed,
            "lock_passwd": False, "ssh_authorized_keys": list(extra.get(F["ssh_keys"]) or [])}
    cfg: dict[str, Any] = {"ssh_pwauth": True, "disable_root": True, "manage_etc_hosts": not etc_hosts_exists}
    if username:  # cloud-init 22.4 sets a default user named None when there is no username; here none
        cfg["system_info"] = {"default_user": user}
    userdata = read_file(top, USERDATA)
    return {"metadata": {"instance-id": vm[F["instance_id"]], "local-hostname": vm[F["name"]], "public-keys": []},
            "userdata": userdata, "network_config": network_config(netadps, where.rsplit("/", 1)[0]), "cfg": cfg}


class RbxCloud(Datasource):
    name = "RbxCloud"
    stages = (LOCAL,)
    platform = "rbxcloud"
    detection = (
        Disk(*LABELS, why="filesystem labelled CLOUDMD on {value}"),
    )

    def fetch(self) -> bool:
        from cloudseed.agent.datasources._disk_image import extracted
        from cloudseed.agent.devices import find_devices_by_label

        hosts = self.ctx.root.exists("/etc/hosts")
        for device in find_devices_by_label(LABELS):
            with extracted(device) as top:
                found = read_dir(top, device, hosts)
            if found is None:
                LOG.info("%s is labelled %s but has no %s", device, LABELS[0], METADATA)
                continue
            self.metadata = found["metadata"]
            self.userdata_raw = found["userdata"]
            self.network_config = found["network_config"]
            self.extra["cloud_config"] = found["cfg"]  # the user's password hash: root-only
            self.raw = {"meta_data": self.metadata}
            self.subplatform = f"config-disk ({device})"
            return True
        return False


DATASOURCE = RbxCloud
