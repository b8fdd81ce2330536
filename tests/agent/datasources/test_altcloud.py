"""The AltCloud datasource: the cloud type from /etc/sysconfig/cloud-info or DMI, user-data from a
real floppy image (FAT, RHEV) and a real CD (ISO 9660 labelled CDROM, vSphere) attached as a loop
device; compared with cloud-init 22.4's ``get_cloud_type`` (its CLOUD_INFO_FILE and DMI reader
pointed at the test root) and ``read_user_data_callback`` on the same files.
"""

from __future__ import annotations

import json
import os

import pytest

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.datasources._disk_image import extracted
from cloudseed.agent.datasources.altcloud import METADATA, AltCloud, cloud_type, user_data_in
from cloudseed.agent.state import Paths
from tests.agent.datasources.diskimages import loop_device, make_iso, make_vfat, write_tree

USER_DATA = "#cloud-config\nruncmd: [[touch, /run/altcloud]]\n"


def context(target) -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage=LOCAL)


TYPES = [
    ({"sys/class/dmi/id/product_name": "RHEV Hypervisor\n"}, "RHEV"),
    ({"sys/class/dmi/id/product_name": "VMware Virtual Platform\n"}, "VSPHERE"),
    ({"sys/class/dmi/id/product_name": "Standard PC (Q35 + ICH9, 2009)\n"}, "UNKNOWN"),
    ({"sys/class/dmi/id/product_name": "oVirt Node\n"}, "UNKNOWN"),  # near miss: not RHEV
    ({"etc/sysconfig/cloud-info": "rhev\n", "sys/class/dmi/id/product_name": "VMware7,1\n"}, "RHEV"),
    ({"etc/sysconfig/cloud-info": "vsphere\n"}, "VSPHERE"),
    ({}, "UNKNOWN"),
]


@pytest.mark.parametrize("facts,expected", TYPES)
def test_cloud_type(target, facts, expected):
    write_tree(target.top, facts)
    assert cloud_type(context(target))[0] == expected


REF_TYPE = r"""
import json, sys
from cloudinit import dmi
from cloudinit.sources import DataSourceAltCloud as m
root = sys.argv[1]
m.CLOUD_INFO_FILE = root + "/etc/sysconfig/cloud-info"
def read_dmi(key):
    assert key == "system-product-name"
    try:
        return open(root + "/sys/class/dmi/id/product_name").read().strip()
    except OSError:
        return None
m.dmi.read_dmi_data = read_dmi
ds = m.DataSourceAltCloud({}, None, None)
out = {"type": ds.get_cloud_type()}
if len(sys.argv) > 2:
    out["user_data"] = m.read_user_data_callback(sys.argv[2])
print(json.dumps(out))
"""


def test_same_cloud_type_as_cloud_init(tmp_path):
    from tests.reference import reference_python

    for i, (facts, expected) in enumerate(TYPES):
        root = write_tree(str(tmp_path / f"r{i}"), facts)
        ref = json.loads(reference_python(REF_TYPE, root).stdout)
        assert ref["type"] == expected, (facts, ref)


@pytest.mark.parametrize("names", [["user-data.txt"], ["deltacloud-user-data.txt"],
                                   ["user-data.txt", "deltacloud-user-data.txt"]])
def test_user_data_files_as_cloud_init(tmp_path, names):
    from tests.reference import reference_python

    src = write_tree(str(tmp_path / "fd"), {n: f"\n{USER_DATA}# from {n}\n\n" for n in names})
    ref = json.loads(reference_python(REF_TYPE, str(tmp_path), src).stdout)
    with extracted(make_vfat(src, str(tmp_path / "floppy.img"), "FLOPPY", size_kib=1440)) as top:
        ours = user_data_in(top)
    assert ours.decode() == ref["user_data"]
    assert ours.endswith(b"# from deltacloud-user-data.txt" if len(names) == 2 else f"# from {names[0]}".encode())


def test_rhev_without_a_floppy_is_not_possible(target):
    if os.path.exists("/dev/fd0"):
        pytest.skip("this host has a floppy")
    write_tree(target.top, {"sys/class/dmi/id/product_name": "RHEV Hypervisor\n"})
    from cloudseed.agent.datasources import altcloud

    if altcloud.A_FLOPPY.value(context(target), "AltCloud") is not None:
        pytest.skip("this host has a floppy controller")
    assert AltCloud.why(context(target)) is None
    assert find_datasource(context(target), ["AltCloud"]).tried == []


def test_vsphere_cdrom_on_a_loop_device(target, tmp_path):
    write_tree(target.top, {"sys/class/dmi/id/product_name": "VMware Virtual Platform\n"})
    ctx = context(target)
    src = write_tree(str(tmp_path / "cd"), {"user-data.txt": USER_DATA})
    with loop_device(make_iso(src, str(tmp_path / "cd.iso"), "CDROM")) as device:
        why = AltCloud.why(ctx)
        search = find_datasource(ctx, ["AltCloud"])
    assert why == f"vSphere and a filesystem labelled CDROM on {device}"
    ds = search.datasource
    assert ds is not None, search.errors
    assert ds.userdata_raw == USER_DATA.strip().encode() and ds.metadata == METADATA
    assert ds.instance_id == "455" and ds.local_hostname == "localhost"
    assert ds.subplatform.startswith("vsphere (") and device in ds.subplatform


def test_vsphere_cd_without_user_data_is_not_found(target, tmp_path):
    write_tree(target.top, {"etc/sysconfig/cloud-info": "VSPHERE\n"})
    src = write_tree(str(tmp_path / "cd"), {"context.sh": "A='1'\n"})
    with loop_device(make_iso(src, str(tmp_path / "cd.iso"), "CDROM")):
        search = find_datasource(context(target), ["AltCloud"])
    assert search.datasource is None and search.errors == []
