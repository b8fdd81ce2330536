"""OVF: the OVF environment document ``ovf-env.xml`` of a vApp (VMware style; Azure's is ``azure.py``).

Where it is, first found wins: a seed directory (``/var/lib/cloud/seed/ovf``, or ``/var/lib/cloud/seed``
where cloud-init's datasource looks), VMware's
``guestinfo.ovfEnv`` (through ``vmware-rpctool`` where DMI says VMware), an ISO 9660 filesystem
labelled ``OVF ENV``/``OVFENV``/``OVF-TRANSPORT`` read in userspace (``seedfs``: nothing mounted).
The ``PropertySection`` properties are read as cloud-init 22.4 reads them: ``instance-id``
(default ``iid-dsovf``), ``hostname``/``local-hostname``, ``public-keys``, ``seedfrom`` (a local
NoCloud-style directory: ``/`` or ``file://``), ``user-data`` (base64, else as it is),
``network-config`` (base64 YAML; not from a seed directory), ``password`` (cloud-init's config
object: here vendor-data ``password:``, so it applies below user-data, and private). The XML is
parsed by the standard library only after refusing any ``<!DOCTYPE``/``<!ENTITY`` (no entity can
be declared, so none is expanded) and anything over 1 MiB.
Not done: VMware's guest customization (the IMC ``cust.cfg`` of the deployPkg plugin) and the
scan of every CD-ROM for an unlabelled OVF ISO.
"""

from __future__ import annotations

import logging
import os

from cloudseed.agent.datasources import LOCAL, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import AllOf, Disk, Dmi, Not, Path, on_path
from cloudseed.clouds.ovf import CLOUD, ENV_NAMES, LABELS

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.datasources.ovf")

ENV_NS = CLOUD.names["namespace"]  # the wire contract: clouds/ovf.py
F = CLOUD.fields
SEED_DIRS = ("/var/lib/cloudseed/seed/ovf", "/var/lib/cloud/seed/ovf", "/var/lib/cloud/seed")  # the last: cloud-init's
DEFAULT_IID = "iid-dsovf"
MAX_BYTES = 1024 * 1024
MD_PROPS = tuple(F[role] for role in ("seedfrom", "local_hostname", "public_keys", "instance_id"))


class OvfError(Exception):
    """The OVF environment is refused or unusable; the message names where and why."""


def properties(data: bytes | str, where: str = "ovf-env.xml") -> dict[str, str]:
    """``{key: value}`` of the first ``PropertySection`` of an OVF environment document."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        raise OvfError(f"{where} is {len(raw)} bytes; the limit is {MAX_BYTES}")
    lowered = raw.lower()
    if b"<!doctype" in lowered or b"<!entity" in lowered:
        raise OvfError(f"{where} carries a DTD (<!DOCTYPE or <!ENTITY); refused, no entity is expanded")
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(raw)
    except ET.ParseError as e:
        raise OvfError(f"{where}: not well-formed XML ({e})") from None

    def local(tag: str) -> str:
        return tag.rpartition("}")[2]

    if local(root.tag) != "Environment":
        raise OvfError(f"{where}: the document element is {local(root.tag)!r}, not an OVF Environment")
    sections = [child for child in root if local(child.tag) == CLOUD.names["section"]]
    if not sections:
        raise OvfError(f"{where}: no {CLOUD.names['section']}")
    props: dict[str, str] = {}
    for prop in sections[0]:
        if local(prop.tag) != CLOUD.names["property"]:
            continue
        key, value = (prop.get(f"{{{ENV_NS}}}{CLOUD.names[name]}") for name in ("key", "value"))
        if key is None or value is None:
            raise OvfError(f"{where}: a Property without oe:key and oe:value ({ENV_NS})")
        props[key] = value
    return props


def read_environment(data: bytes | str, where: str = "ovf-env.xml",
                     read_network: bool = False) -> tuple[dict[str, Any], bytes | None, dict[str, Any]]:
    """``(metadata, user-data, config)`` from the properties, as cloud-init 22.4 derives them."""
    import base64
    import binascii

    md: dict[str, Any] = {}
    cfg: dict[str, Any] = {}
    ud: bytes | None = None
    for key, value in properties(data, where).items():
        if key == F["hostname"]:
            key = F["local_hostname"]
        if key in MD_PROPS:
            md[key] = value
        elif key == F["password"]:
            cfg[key] = value
        elif key == F["network_config"] and read_network:
            try:
                text = base64.b64decode(value.encode(), validate=True).decode("utf-8")
                from cloudseed.agent.config import ConfigFileError, load_yaml_mapping

                md[key] = load_yaml_mapping(text, f"{where} network-config").get("network")
            except (binascii.Error, ValueError, ConfigFileError) as e:
                LOG.warning("%s: network-config ignored: %s", where, e)
        elif key == F["user_data"]:
            try:
                ud = base64.b64decode(value.encode(), validate=True)
            except (binascii.Error, ValueError):
                ud = value.encode()
    return md, ud, cfg


def find_env(top: str) -> tuple[str, bytes] | None:
    """``(name, bytes)`` of the environment file in directory ``top``, bounded, or None."""
    for name in ENV_NAMES:
        path = os.path.join(top, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
            if len(data) > MAX_BYTES:
                raise OvfError(f"{path} is larger than {MAX_BYTES} bytes")
            return name, data
    return None


def read_image(path: str) -> bytes | None:
    """The environment document on the ISO image or device ``path`` (read in userspace), or None."""
    import shutil
    import tempfile

    from cloudseed.agent.seedfs import SeedFSError, extract

    tmp = tempfile.mkdtemp(prefix="cloudseed-ovf-", dir="/run" if os.access("/run", os.W_OK) else None)
    try:
        try:
            extract(path, tmp, max_total_bytes=8 * MAX_BYTES, max_files=100)
        except SeedFSError as e:
            raise OvfError(str(e)) from None
        found = find_env(tmp)
        return None if found is None else found[1]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _is_vmware(ctx: DatasourceContext) -> bool:
    return "vmware" in ctx.dmi("product_name").lower()


# Azure's ovf-env.xml is the Azure datasource's
NOT_AZURE = Not(Dmi("chassis_asset_tag", "7783-7084-3265-9085-8269-3286-77"))


class OVF(Datasource):
    name = "OVF"
    stages = (LOCAL,)
    platform = "ovf"
    sensitive_keys = ("password",)
    # a seed directory, an ISO labelled as an OVF transport, or VMware with vmware-rpctool
    detection = (
        Path(*SEED_DIRS, kind="file", inside=ENV_NAMES, why="seed directory {value}"),
        AllOf(NOT_AZURE, Disk(*LABELS, fstypes=("iso9660",)),
              why="filesystem labelled as an OVF transport on {value}"),
        AllOf(NOT_AZURE, Dmi("product_name", "*vmware*", nocase=True), on_path("vmware-rpctool"),
              why="DMI says VMware and vmware-rpctool can read guestinfo.ovfEnv"),
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "ovf"

    @classmethod
    def _seed(cls, ctx: DatasourceContext) -> str | None:
        for directory in SEED_DIRS:
            for name in ENV_NAMES:
                if ctx.root.isfile(f"{directory}/{name}"):
                    return directory
        return None

    def fetch(self) -> bool:
        found, md, ud, cfg = self._find()
        if found is None:
            return False
        vd: bytes | None = None
        seedfrom = str(md.get("seedfrom") or "")
        if seedfrom:
            path = seedfrom[len("file://"):] if seedfrom.startswith("file://") else seedfrom
            if not path.startswith("/"):
                LOG.info("OVF seedfrom %s is not a local path; not used", seedfrom)
                return False
            seed_md, seed_ud, vd = self._read_seed(path)
            md = {**seed_md, **md}
            ud = seed_ud
            found = f"{found},{seedfrom}"
        md.setdefault("instance-id", DEFAULT_IID)
        self.metadata = md
        self.userdata_raw = ud
        if md.get("network-config"):
            self.network_config = md["network-config"]
        keys = md.get("public-keys")
        self.public_keys = [] if not keys else list(keys) if isinstance(keys, list) else [str(keys)]
        if cfg.get("password"):
            import json

            self.extra["password"] = cfg["password"]
            vd = ("#cloud-config\n" + json.dumps({"password": cfg["password"]}) + "\n").encode()
        self.vendordata_raw = vd
        kind = "vmware" if self.ctx.dmi("product_name").lower() == "vmware" else "ovf"
        self.subplatform = f"{kind} ({found})"
        self.raw = {"meta_data": md}
        return True

    def _find(self) -> tuple[str | None, dict[str, Any], bytes | None, dict[str, Any]]:
        ctx = self.ctx
        seed = self._seed(ctx)
        if seed is not None:
            name, data = find_env(ctx.root.path(seed)) or ("", b"")
            md, ud, cfg = read_environment(data, f"{seed}/{name}")
            return f"{seed}/{name}", md, ud, cfg
        if _is_vmware(ctx) and ctx.root.which("vmware-rpctool"):
            from cloudseed.agent.datasources.vmware import Guestinfo

            text = Guestinfo(ctx, ctx.root.which("vmware-rpctool") or "").get(CLOUD.names["guestinfo"])
            if text and text.lstrip().lower().startswith("<?xml"):
                md, ud, cfg = read_environment(text, f"guestinfo.{CLOUD.names['guestinfo']}", read_network=True)
                return "com.vmware.guestInfo", md, ud, cfg
        from cloudseed.agent.devices import find_devices_by_label

        for device in find_devices_by_label(LABELS, ("iso9660",)):
            data = read_image(device)
            if data is None:
                LOG.info("%s is labelled as an OVF transport but holds no ovf-env.xml", device)
                continue
            md, ud, cfg = read_environment(data, f"{device}/ovf-env.xml", read_network=True)
            return "iso", md, ud, cfg
        return None, {}, None, {}

    def _read_seed(self, path: str) -> tuple[dict[str, Any], bytes | None, bytes | None]:
        from cloudseed.agent.config import ConfigFileError, load_yaml_mapping

        root = self.ctx.root
        base = path.rstrip("/")
        if not root.isfile(f"{base}/meta-data"):
            raise OvfError(f"OVF seedfrom {path}: no meta-data there")
        try:
            md = load_yaml_mapping(root.read_text(f"{base}/meta-data"), f"{base}/meta-data")
        except ConfigFileError as e:
            raise OvfError(str(e)) from None
        ud = root.read_bytes(f"{base}/user-data") if root.isfile(f"{base}/user-data") else None
        vd = root.read_bytes(f"{base}/vendor-data") if root.isfile(f"{base}/vendor-data") else None
        return md, ud, vd


DATASOURCE = OVF
