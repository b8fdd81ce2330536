"""ConfigDrive: OpenStack's read-only disk labelled ``config-2`` (ISO 9660 or VFAT).

The drive (a CD-ROM, a disk or a partition) carries ``openstack/<version>/`` (meta_data.json,
user_data, vendor_data.json, vendor_data2.json, network_data.json) and often
``ec2/latest/meta-data.json``; the newest version we understand is read. Without
network_data.json, the interfaces file that ``meta_data.json``'s ``network_config.content_path``
names (Proxmox VE's ``/content/0000``) is the network config (``_eni.py``). A seed directory
(``/var/lib/cloud/seed/config_drive``) with the same layout works too. Needs no network.
"""

from __future__ import annotations

import logging
import os

from cloudseed.agent.datasources import LOCAL, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import AllOf, AnyOf, Disk, Listed, Not, Path
from cloudseed.agent.datasources._openstack_common import F, MetadataError, fill_datasource, load_json, read_tree
from cloudseed.agent.datasources.ibmcloud import IBM_CONFIG_UUID

LOG = logging.getLogger("cloudseed.datasources.configdrive")

LABELS = ("config-2", "CONFIG-2")
SEED_DIRS = ("/var/lib/cloudseed/seed/config_drive", "/var/lib/cloud/seed/config_drive")
MAX_FILE = 32 * 1024 * 1024


def _reader(top: str):
    """``read(relative) -> bytes | None`` over a directory, bounded, never leaving ``top``."""
    real_top = os.path.realpath(top)

    def read(relative: str) -> bytes | None:
        path = os.path.realpath(os.path.join(real_top, relative))
        if not path.startswith(real_top + os.sep) or not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            data = f.read(MAX_FILE + 1)
        if len(data) > MAX_FILE:
            raise MetadataError(f"{path} is larger than {MAX_FILE} bytes")
        return data

    return read


# a config-2 filesystem, less IBM Cloud's (Xen, FAT volume id 9796-932E) when IBMCloud is listed
# (one device scan whichever branch applies)
_IBM_IN_PLAY = AllOf(Listed("IBMCloud"), Path("/proc/xen"))
CONFIG_DRIVE = AnyOf(
    AllOf(Not(_IBM_IN_PLAY), Disk(*LABELS, udev_hint=True)),
    AllOf(_IBM_IN_PLAY, Disk(*LABELS, uuid_not=IBM_CONFIG_UUID, udev_hint=True)),
    why="filesystem labelled config-2 on {value}")


def config_drives(ctx: DatasourceContext) -> list[str]:
    """The devices ``CONFIG_DRIVE`` finds."""
    found = CONFIG_DRIVE.value(ctx, ConfigDrive.name)
    return found.split(", ") if found else []


class ConfigDrive(Datasource):
    name = "ConfigDrive"
    stages = (LOCAL,)
    platform = "openstack"
    sensitive_keys = (F["admin_pass"], F["random_seed"])  # meta_data.json's (clouds/openstack.py)
    detection = (
        Path(*SEED_DIRS, kind="dir", inside=("openstack",), why="seed directory {value}"),
        CONFIG_DRIVE,
    )

    def __init__(self, ctx: DatasourceContext):
        super().__init__(ctx)
        self.cloud_name = "openstack"
        self.warnings: list[str] = []

    @classmethod
    def _seed_dirs(cls, ctx: DatasourceContext) -> list[str]:
        from cloudseed.clouds.openstack import CLOUD  # a config drive carries OpenStack's tree as files

        return [d for d in SEED_DIRS if ctx.root.isdir(d + CLOUD.requests["versions"].path)]

    def fetch(self) -> bool:
        for directory in self._seed_dirs(self.ctx):
            if self._read_from(self.ctx.root.path(directory), directory, "seed-dir"):
                return True
        from cloudseed.agent.devices import MountError, mounted_readonly

        for device in config_drives(self.ctx):
            try:
                with mounted_readonly(device) as mnt:
                    if self._read_from(mnt, device, "config-disk"):
                        return True
            except MountError as e:
                LOG.warning("%s", e)
        return False

    def _read_from(self, top: str, where: str, kind: str) -> bool:
        read = _reader(top)
        os_dir = os.path.join(top, "openstack")
        versions = sorted(os.listdir(os_dir)) if os.path.isdir(os_dir) else []
        if not versions:
            LOG.warning("%s is labelled as a config drive but has no openstack/ directory", where)
            return False
        try:
            tree = read_tree(read, versions, where, signatures=self.ctx.checks_signatures)
            ec2 = read("ec2/latest/meta-data.json")
            if ec2 is not None:
                try:
                    tree["ec2_metadata"] = load_json(ec2, f"{where}/ec2/latest/meta-data.json")
                except MetadataError as e:
                    LOG.error("%s; ignored", e)
                    self.warnings.append(str(e))
            fill_datasource(self, tree, where)
            if self.network_config is None:
                self._eni_network(read, where)
        except MetadataError as e:
            LOG.error("config drive %s", e)
            raise
        meta_dsmode = (self.metadata.get("meta") or {}).get("dsmode") if isinstance(
            self.metadata.get("meta"), dict) else None
        if meta_dsmode == "disabled":
            LOG.info("config drive %s: meta dsmode=disabled; not used", where)
            return False
        self.subplatform = f"{kind} ({where})"
        return True

    def _eni_network(self, read, where: str) -> None:
        """No network_data.json: the interfaces file meta_data.json's network_config points at (Proxmox)."""
        item = self.metadata.get("network_config")
        if not isinstance(item, dict) or self.ctx.ds_cfg(self.name).get("apply_network_config", True) is False:
            return
        pieces = [p for p in str(item.get("content_path", "")).split("/") if p]
        if not pieces or ".." in pieces:
            raise MetadataError(f"{where}: meta_data.json network_config has no valid content_path ({item!r})")
        data = read("/".join(["openstack", *pieces]))
        if data is None:
            raise MetadataError(f"{where}/openstack/{'/'.join(pieces)} (network_config's content_path) is missing")
        from cloudseed.agent.datasources._eni import ENIError, eni_to_v1

        try:
            self.network_config = eni_to_v1(data.decode("utf-8", "replace"), f"{where}/openstack/{'/'.join(pieces)}")
        except ENIError as e:
            raise MetadataError(str(e)) from None


DATASOURCE = ConfigDrive
