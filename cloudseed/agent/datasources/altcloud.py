"""AltCloud: RHEV-M (user-data on the floppy ``/dev/fd0``) and vSphere via Deltacloud (user-data on
a CD labelled ``CDROM``), as cloud-init 22.4 reads them.

The cloud type is the first line of ``/etc/sysconfig/cloud-info`` (images built by Image
Factory write it), else DMI ``product_name``: starting with ``RHEV`` (``RHEV Hypervisor``) or
``VMware`` (``VMware Virtual Platform``). Detection (local facts only): type RHEV and a floppy
(``/dev/fd0``, or the floppy driver loadable: fetch runs ``modprobe floppy`` as cloud-init does),
or type VSPHERE and a filesystem labelled ``CDROM``. The disk is read in userspace:
``deltacloud-user-data.txt``, else ``user-data.txt``, stripped. There is no metadata: the
instance id is cloud-init's fixed ``455`` and the hostname ``localhost``. A vSphere VM without a
CDROM-labelled disk is left to the VMware datasource (cloud-init would try AltCloud and fail).
"""

from __future__ import annotations

import logging

from cloudseed.agent.datasources import LOCAL, Datasource, DatasourceContext
from cloudseed.agent.datasources._facts import AllOf, AnyOf, Disk, Dmi, FileText, Not, Path
from cloudseed.clouds.altcloud import CLOUD, FLOPPY, LABEL

LOG = logging.getLogger("cloudseed.datasources.altcloud")

CLOUD_INFO_FILE = CLOUD.names["cloud_info"]  # the wire contract: clouds/altcloud.py
RHEV_WORD, VSPHERE_WORD = CLOUD.names["rhev"], CLOUD.names["vsphere"]
USER_DATA_FILES = tuple(CLOUD.requests[role].path for role in ("user_data", "user_data_old"))
# cloud-init's META_DATA_NOT_SUPPORTED: the same for every instance
METADATA = {"block-device-mapping": {}, "instance-id": 455, "local-hostname": "localhost", "placement": {}}


def cloud_type(ctx: DatasourceContext) -> tuple[str, str]:
    """``("RHEV" | "VSPHERE" | <cloud-info's word> | "UNKNOWN", where it came from)``."""
    if ctx.root.isfile(CLOUD_INFO_FILE):
        text = ctx.root.read_text(CLOUD_INFO_FILE, default="").strip().upper()
        return text, f"{CLOUD_INFO_FILE} says {text!r}"
    product = ctx.dmi("product_name")
    if product.upper().startswith(RHEV_WORD):
        return RHEV_WORD, f"DMI product_name is {product!r}"
    if product.upper().startswith("VMWARE"):
        return VSPHERE_WORD, f"DMI product_name is {product!r}"
    return "UNKNOWN", ""


def user_data_in(top: str) -> bytes | None:
    """The stripped user-data file of a mounted/extracted floppy or CD, None when there is none."""
    from cloudseed.agent.datasources._disk_image import read_file

    for name in USER_DATA_FILES:
        data = read_file(top, name)
        if data is not None:
            return data.strip()
    return None


# cloud_type as facts: the cloud-info file says RHEV / VSPHERE (RHEV first), else DMI product_name
# starts with RHEV / VMware
_NO_CLOUD_INFO = Not(Path(CLOUD_INFO_FILE, kind="file"))
_INFO_RHEV = FileText(CLOUD_INFO_FILE, "*rhev*", nocase=True)
RHEV = AnyOf(_INFO_RHEV, AllOf(_NO_CLOUD_INFO, Dmi("product_name", "rhev*", nocase=True)))
VSPHERE = AnyOf(AllOf(FileText(CLOUD_INFO_FILE, "*vsphere*", nocase=True), Not(_INFO_RHEV)),
                AllOf(_NO_CLOUD_INFO, Dmi("product_name", "vmware*", nocase=True)))
# the host's floppy, or its controller (ACPI PNP0700) though the driver is not loaded
A_FLOPPY = AnyOf(Path(FLOPPY, host=True), FileText("/sys/bus/pnp/devices/*/id", "*PNP0700*", host=True))


class AltCloud(Datasource):
    name = "AltCloud"
    stages = (LOCAL,)
    platform = "altcloud"
    detection = (
        AllOf(RHEV, A_FLOPPY, why="RHEV and a floppy ({value})"),
        AllOf(VSPHERE, Disk(LABEL), why="vSphere and a filesystem labelled CDROM on {value}"),
    )

    def fetch(self) -> bool:
        kind, _ = cloud_type(self.ctx)
        if RHEV_WORD in kind:
            devices = [self._floppy()]
        elif VSPHERE_WORD in kind:
            from cloudseed.agent.devices import find_devices_by_label

            devices = find_devices_by_label([LABEL])
        else:
            return False
        from cloudseed.agent.datasources._disk_image import extracted

        for device in devices:
            if not device:
                continue
            with extracted(device) as top:
                data = user_data_in(top)
            if data is None:
                LOG.info("AltCloud: %s has neither %s", device, " nor ".join(USER_DATA_FILES))
                continue
            self.userdata_raw = data
            self.metadata = dict(METADATA)
            self.raw = {"meta_data": self.metadata}
            self.subplatform = f"{'rhev' if RHEV_WORD in kind else 'vsphere'} ({device})"
            return True
        return False

    @staticmethod
    def _floppy() -> str | None:
        import os

        from cloudseed.core.root import run_on_machine

        if not os.path.exists(FLOPPY):
            loaded = run_on_machine(["modprobe", "floppy"], timeout=10)
            if loaded.returncode in (124, 127):
                LOG.warning("AltCloud: could not load the floppy driver: %s", loaded.stderr.strip())
            run_on_machine(["udevadm", "settle", f"--exit-if-exists={FLOPPY}", "--timeout=5"], timeout=10)
        if not os.path.exists(FLOPPY):
            LOG.warning("AltCloud: RHEV, but there is no %s", FLOPPY)
            return None
        return FLOPPY


DATASOURCE = AltCloud
