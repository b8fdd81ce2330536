"""IBMCloud (SoftLayer): its config disk, on Xen guests, as cloud-init 22.4 reads it.

Two launch modes. "OS code": a disk labelled ``config-2`` whose FAT volume id is ``9796-932E``
(that id is what tells it from an OpenStack config drive); networking from its
``network_data.json``. "Template", after the provisioning boot: a disk labelled ``METADATA``;
the provisioning boot already configured the network, so network config is ``disabled``.
Both carry only ``openstack/latest/``: ``meta_data.json`` (required; ``uuid`` -> instance-id,
``hostname`` -> local-hostname, ``public_keys`` -> public-keys, ``random_seed`` base64),
``user_data``, ``vendor_data.json`` (its ``cloud-init`` entry), ``network_data.json``; the
template disk's ``meta.js`` and ``openstack/content/interfaces`` are ignored, as cloud-init does.
Possible only on Xen (``/proc/xen``) with such a disk; never during IBM's provisioning boot
(``/root/provisioningConfiguration.cfg`` present and ``/root/swinstall.log`` absent or newer than
``/proc/1/environ``), as ds-identify decides. The disk is read in userspace, nothing mounted.
"""

from __future__ import annotations

import logging

from cloudseed.agent.datasources import LOCAL, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import AllOf, Disk, Hatch, Not, Path
from cloudseed.clouds.ibmcloud import CLOUD, OS_CODE_LABEL, TEMPLATE_LABEL

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.datasources.ibmcloud")

IBM_CONFIG_UUID = CLOUD.names["config_uuid"]  # the wire contract: clouds/ibmcloud.py
OS_CODE, TEMPLATE_LIVE = CLOUD.names["os_code"], CLOUD.names["template"]
PROVISIONING_CFG, PROVISIONING_LOG = CLOUD.names["provisioning_cfg"], CLOUD.names["provisioning_log"]
F = CLOUD.fields
FILES = {role: CLOUD.requests[role].path for role in ("meta_data", "user_data", "vendor_data", "network_data")}


class IBMError(Exception):
    """The IBM config disk is unusable; the message names the device and file."""


def provisioning(ctx: DatasourceContext) -> bool:
    """Is this IBM's provisioning boot (cloud-init stays off)?"""
    import os

    if not ctx.root.exists(PROVISIONING_CFG):
        return False
    if not ctx.root.exists(PROVISIONING_LOG):
        return True
    try:
        return os.stat(ctx.root.path(PROVISIONING_LOG)).st_mtime > os.stat(ctx.root.path("/proc/1/environ")).st_mtime
    except OSError:
        return False


PROVISIONING_BOOT = Hatch(
    "ibm_provisioning_boot", python=provisioning,
    shell=f'[ -e "$root{PROVISIONING_CFG}" ] && {{ [ ! -e "$root{PROVISIONING_LOG}" ] || '
          f'[ "$root{PROVISIONING_LOG}" -nt "$root/proc/1/environ" ]; }}',
    why=f"IBM's provisioning boot ({PROVISIONING_CFG})")


def platform_of(ctx: DatasourceContext) -> tuple[str, str] | None:
    """``(OS_CODE | TEMPLATE_LIVE, device)`` by the declared detection, or None (not IBM Cloud, or
    its provisioning boot)."""
    for kind, fact in zip((OS_CODE, TEMPLATE_LIVE), IBMCloud.detection):
        found = fact.value(ctx, IBMCloud.name)
        if found:
            return kind, found.split(", ")[0]
    return None


def read_dir(top: str, where: str) -> dict[str, Any]:
    """``{"metadata", "userdata", "vendordata", "networkdata"}`` from ``top``/openstack/latest/."""
    import base64
    import binascii
    import json

    from cloudseed.agent.datasources._disk_image import read_file

    found: dict[str, Any] = {}
    for key, role in (("metadata_raw", "meta_data"), ("userdata", "user_data"),
                      ("vendordata", "vendor_data"), ("networkdata", "network_data")):
        raw = read_file(top, FILES[role])
        if raw is not None and CLOUD.requests[role].form == "json":
            try:
                raw = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                raise IBMError(f"{where}/{FILES[role]}: not JSON ({e})") from None
        found[key] = raw
    md_raw = found.pop("metadata_raw")
    if md_raw is None:
        raise IBMError(f"{where}: the required {FILES['meta_data']} is missing")
    if not isinstance(md_raw, dict):
        raise IBMError(f"{where}/{FILES['meta_data']}: not a JSON object")
    md: dict[str, Any] = {}
    if F["random_seed"] in md_raw:
        try:
            base64.b64decode(md_raw[F["random_seed"]], validate=True)
        except (binascii.Error, ValueError, TypeError) as e:
            raise IBMError(f"{where}/{FILES['meta_data']}: random_seed is not base64 ({e})") from None
        md["random_seed"] = md_raw[F["random_seed"]]  # kept encoded: Datasource.random_seed decodes it
    for role, new in (("public_keys", "public-keys"), ("hostname", "local-hostname"), ("instance_id", "instance-id")):
        if F[role] in md_raw:
            md[new] = md_raw[F[role]]
    found["metadata"] = md
    return found


class IBMCloud(Datasource):
    name = "IBMCloud"
    stages = (LOCAL,)
    platform = "ibmcloud"
    sensitive_keys = ("random_seed",)

    # the OS code disk, then the template's (platform_of tells them apart by this order)
    detection = (
        AllOf(Path("/proc/xen"), Not(PROVISIONING_BOOT), Disk(OS_CODE_LABEL, uuid=IBM_CONFIG_UUID),
              why=f"Xen and a filesystem labelled config-2 with UUID {IBM_CONFIG_UUID} on {{value}}"),
        AllOf(Path("/proc/xen"), Not(PROVISIONING_BOOT), Disk(TEMPLATE_LABEL),
              why="Xen and a filesystem labelled METADATA on {value}"),
    )

    def fetch(self) -> bool:
        from cloudseed.agent.datasources._disk_image import extracted
        from cloudseed.agent.datasources._openstack_common import public_keys, vendordata_bytes

        found = platform_of(self.ctx)
        if found is None:
            return False
        kind, device = found
        with extracted(device) as top:
            data = read_dir(top, device)
        md = data["metadata"]
        if md.get("instance-id") in (None, ""):
            raise IBMError(f"{device}/{FILES['meta_data']} has no '{F['instance_id']}' (the instance id)")
        self.metadata = md
        self.public_keys = public_keys({"public_keys": md.get("public-keys")})
        self.userdata_raw = data["userdata"]
        self.vendordata_raw = vendordata_bytes(data["vendordata"], f"{device}/{FILES['vendor_data']}")
        if kind == OS_CODE:
            network = data["networkdata"]
            self.network_config = network if isinstance(network, dict) and network else None
        else:
            self.network_config = {"version": 1, "config": "disabled"}
        uuid = self.ctx.root.read_text("/sys/hypervisor/uuid", default="").strip().lower()
        self.raw = {"meta_data": md, "system-uuid": uuid or None, "platform": kind}
        self.subplatform = f"{kind} ({device})"
        return True


DATASOURCE = IBMCloud
