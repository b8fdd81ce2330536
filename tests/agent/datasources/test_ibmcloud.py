"""The IBMCloud datasource: its "OS code" config-2 disk (FAT, volume id 9796-932E) and its "template"
METADATA disk, as real images on loop devices, on a root that says Xen; the provisioning boot;
ConfigDrive leaving IBM's disk alone; compared with cloud-init 22.4's ``metadata_from_dir`` and
``get_ibm_platform`` (its ``_is_xen`` said True and its real blkid output narrowed to the device
under test, so other tests' devices on this host do not count).
"""

from __future__ import annotations

import base64
import json
import os
import time

import pytest

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.datasources._disk_image import extracted
from cloudseed.agent.datasources.configdrive import ConfigDrive
from cloudseed.agent.datasources.ibmcloud import (
    IBM_CONFIG_UUID,
    OS_CODE,
    TEMPLATE_LIVE,
    IBMCloud,
    IBMError,
    read_dir,
)
from cloudseed.agent.devices import volume_id
from cloudseed.agent.state import Paths
from tests.agent.datasources.diskimages import loop_device, make_iso, make_vfat, write_tree

KEY = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC3 ibm@example"
SEED = base64.b64encode(b"\x01\x02random").decode()
META = {"uuid": "0bd2a5e0-1dd8-4b43-a6d6-ab0a2fa0a2f7", "hostname": "ibm-os-code", "name": "ibm-os-code",
        "public_keys": {"1234": KEY}, "random_seed": SEED, "files": [], "availability_zone": "dal09"}
NETWORK = {"links": [{"id": "interface_1", "type": "phy", "ethernet_mac_address": "06:9a:b2:c4:3e:7f", "mtu": None}],
           "networks": [{"id": "network_1", "type": "ipv4", "link": "interface_1", "ip_address": "10.82.43.5",
                         "netmask": "255.255.255.192", "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0",
                                                                   "gateway": "10.82.43.1"}]}],
           "services": [{"type": "dns", "address": "10.0.80.11"}]}
VENDOR = {"cloud-init": "#!/bin/bash\necho 'root:$6$x$y' | chpasswd -e\n"}
USER_DATA = "#cloud-config\nruncmd: [[touch, /run/ibm]]\n"


def os_code_files(meta=None) -> dict:
    return {"openstack/latest/meta_data.json": json.dumps(META if meta is None else meta),
            "openstack/latest/network_data.json": json.dumps(NETWORK),
            "openstack/latest/vendor_data.json": json.dumps(VENDOR),
            "openstack/latest/user_data": USER_DATA}


def template_files() -> dict:
    return {"openstack/latest/meta_data.json": json.dumps({"uuid": "t-42", "hostname": "tmpl",
                                                           "public_keys": {"k": KEY}}),
            "openstack/latest/user_data": USER_DATA, "openstack/content/interfaces": "auto eth0\n",
            "meta.js": '{"userData": "x"}'}


def context(target, dslist=None) -> DatasourceContext:
    cfg = {"datasource_list": dslist} if dslist else {}
    return DatasourceContext(root=target, cfg=cfg, cmdline="", paths=Paths(target), stage=LOCAL)


def xen(target) -> None:
    write_tree(target.top, {"proc/xen/capabilities": "", "sys/hypervisor/uuid": "0BD2A5E0-1DD8-4B43\n"})


def test_volume_id_of_fat_images(tmp_path):
    src = write_tree(str(tmp_path / "s"), {"a": "b"})
    assert volume_id(make_vfat(src, str(tmp_path / "16.img"), "config-2", IBM_CONFIG_UUID)) == IBM_CONFIG_UUID
    fat32 = str(tmp_path / "32.img")
    os.system(f"truncate -s 40M {fat32} && mkfs.vfat -F 32 -n config-2 -i 1234ABCD {fat32} >/dev/null")
    assert volume_id(fat32) == "1234-ABCD"


def test_read_os_code_disk(tmp_path):
    src = write_tree(str(tmp_path / "os"), os_code_files())
    with extracted(make_vfat(src, str(tmp_path / "c2.img"), "config-2", IBM_CONFIG_UUID)) as top:
        r = read_dir(top, "img")
    assert r["metadata"] == {"instance-id": META["uuid"], "local-hostname": "ibm-os-code",
                             "public-keys": {"1234": KEY}, "random_seed": SEED}
    assert r["userdata"] == USER_DATA.encode() and r["vendordata"] == VENDOR and r["networkdata"] == NETWORK


@pytest.mark.parametrize("files,message", [
    ({"openstack/latest/user_data": "x"}, "required openstack/latest/meta_data.json is missing"),
    ({"openstack/latest/meta_data.json": '{"uuid": "x"'}, "meta_data.json: not JSON"),
    ({"openstack/latest/meta_data.json": "[1]"}, "not a JSON object"),
    ({"openstack/latest/meta_data.json": '{"uuid": "x", "random_seed": "%%%"}'}, "random_seed is not base64"),
    ({"openstack/latest/meta_data.json": '{"uuid": "x"}', "openstack/latest/network_data.json": "{"},
     "network_data.json: not JSON"),
])
def test_broken_disks_name_the_file(tmp_path, files, message):
    src = write_tree(str(tmp_path / "b"), files)
    with extracted(make_iso(src, str(tmp_path / "b.iso"), "METADATA")) as top, pytest.raises(IBMError) as e:
        read_dir(top, "/dev/xvdh")
    assert message in str(e.value) and "/dev/xvdh" in str(e.value)


def test_os_code_boot_and_config_drive_leaves_the_disk(target, tmp_path):
    xen(target)
    src = write_tree(str(tmp_path / "os"), os_code_files())
    with loop_device(make_vfat(src, str(tmp_path / "c2.img"), "config-2", IBM_CONFIG_UUID)) as device:
        why = IBMCloud.why(context(target))
        search = find_datasource(context(target), ["IBMCloud"])
        # ConfigDrive skips IBM's disk when IBMCloud is listed (as cloud-init's ConfigDrive does)
        cd_with = ConfigDrive.why(context(target, ["ConfigDrive", "IBMCloud", "None"])) or ""
        cd_without = ConfigDrive.why(context(target, ["ConfigDrive", "None"])) or ""
    assert why == f"Xen and a filesystem labelled config-2 with UUID 9796-932E on {device}"
    assert device not in cd_with and device in cd_without
    ds = search.datasource
    assert ds is not None, search.errors
    assert ds.instance_id == META["uuid"] and ds.local_hostname == "ibm-os-code" and ds.public_keys == [KEY]
    assert ds.subplatform == f"{OS_CODE} ({device})" and ds.network_config == NETWORK
    assert ds.vendordata_raw == VENDOR["cloud-init"].encode() and ds.userdata_raw == USER_DATA.encode()
    assert ds.random_seed == b"\x01\x02random" and ds.raw["system-uuid"] == "0bd2a5e0-1dd8-4b43"


def test_other_config_drive_and_no_xen_are_not_ibm(target, tmp_path):
    src = write_tree(str(tmp_path / "os"), os_code_files())
    with loop_device(make_vfat(src, str(tmp_path / "c2.img"), "config-2", "1234-5678")) as device:
        assert IBMCloud.why(context(target)) is None  # not Xen
        xen(target)
        why = IBMCloud.why(context(target)) or ""
    assert device not in why  # an OpenStack config drive (another volume id) is not IBM's


def test_template_boot_and_provisioning(target, tmp_path):
    xen(target)
    src = write_tree(str(tmp_path / "tm"), template_files())
    with loop_device(make_iso(src, str(tmp_path / "md.iso"), "METADATA")) as device:
        ds = find_datasource(context(target), ["IBMCloud"]).datasource
        assert ds is not None and ds.subplatform == f"{TEMPLATE_LIVE} ({device})"
        assert ds.instance_id == "t-42" and ds.network_config == {"version": 1, "config": "disabled"}
        # the provisioning boot: provisioningConfiguration.cfg and no install log yet -> never
        write_tree(target.top, {"proc/1/environ": "", "root/provisioningConfiguration.cfg": "x"})
        assert IBMCloud.why(context(target)) is None
        # the log of an earlier boot (older than /proc/1/environ): a live boot again
        write_tree(target.top, {"root/swinstall.log": "done"})
        old = time.time() - 3600
        os.utime(os.path.join(target.top, "root/swinstall.log"), (old, old))
        assert device in (IBMCloud.why(context(target)) or "")


REFERENCE = r"""
import json, sys
from cloudinit import util
from cloudinit.sources import DataSourceIBMCloud as m
md = m.metadata_from_dir(sys.argv[1])
out = {"metadata": {k: (v.decode("latin-1") if isinstance(v, bytes) else v) for k, v in md["metadata"].items()},
       "userdata": md["userdata"].decode(), "vendordata": md["vendordata"], "networkdata": md["networkdata"]}
if len(sys.argv) > 2:
    m._is_xen = lambda: True
    real = util.blkid  # without its cache: loop devices are reused by the tests with other images
    util.blkid = lambda *a, **k: {d: v for d, v in real(disable_cache=True).items() if d == sys.argv[2]}
    out["platform"] = m.get_ibm_platform()
print(json.dumps(out))
"""


@pytest.mark.parametrize("kind", ["os_code", "template"])
def test_same_data_as_cloud_init(target, tmp_path, kind):
    from tests.reference import reference_python

    src = write_tree(str(tmp_path / kind), os_code_files() if kind == "os_code" else template_files())
    img = (make_vfat(src, str(tmp_path / "c2.img"), "config-2", IBM_CONFIG_UUID) if kind == "os_code"
           else make_iso(src, str(tmp_path / "md.iso"), "METADATA"))
    xen(target)
    with loop_device(img) as device:
        ref = json.loads(reference_python(REFERENCE, src, device).stdout)
        ds = find_datasource(context(target), ["IBMCloud"]).datasource
    assert ref["platform"] == [ds.raw["platform"], device]
    md = dict(ds.metadata)
    if "random_seed" in md:  # named difference: kept base64 (decoded by random_seed); cloud-init decodes it
        assert base64.b64decode(md.pop("random_seed")).decode("latin-1") == ref["metadata"].pop("random_seed")
    assert md == ref["metadata"]
    assert ds.userdata_raw.decode() == ref["userdata"]
    if kind == "os_code":
        assert ds.vendordata_raw.decode() == ref["vendordata"]["cloud-init"] and ds.network_config == ref["networkdata"]


def test_both_generators_on_a_metadata_disk_need_xen(tmp_path):
    from tests.agent.datasources.diskimages import generator_verdicts

    src = write_tree(str(tmp_path / "tm"), template_files())
    with loop_device(make_iso(src, str(tmp_path / "md.iso"), "METADATA")) as device:
        on_xen = generator_verdicts(str(tmp_path / "xen"), {"proc/xen/capabilities": ""})
        elsewhere = generator_verdicts(str(tmp_path / "kvm"), {})
    for kind, verdict in on_xen.items():
        assert verdict.startswith("enabled"), (kind, verdict)
    assert f"IBMCloud (Xen and a filesystem labelled METADATA on {device}" in on_xen["python"]
    for kind, verdict in elsewhere.items():  # (another test's seed device may enable it: never for IBM)
        assert "IBMCloud (" not in verdict and f"metadata on {device}" not in verdict, (kind, verdict)
