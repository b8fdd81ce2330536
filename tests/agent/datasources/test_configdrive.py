"""ConfigDrive from real ISO 9660 and VFAT images attached through loop devices."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess

import pytest

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.state import Paths

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("losetup"),
                                reason="needs root and loop devices")

KEY1 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey1 one@example"
KEY2 = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQKey2 two@example"
NETWORK_DATA = {
    "links": [{"id": "tap1", "type": "phy", "ethernet_mac_address": "fa:16:3e:00:00:01", "mtu": 1450}],
    "networks": [{"id": "net0", "link": "tap1", "type": "ipv4", "ip_address": "10.0.0.5",
                  "netmask": "255.255.255.0",
                  "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.0.0.1"}]}],
    "services": [{"type": "dns", "address": "10.0.0.2"}],
}


def meta(uuid="b0fa911b-69d4-4476-bbe2-1c92bff6535c"):
    return {
        "uuid": uuid, "hostname": "cd-host.novalocal", "name": "cd-host", "availability_zone": "nova-az1",
        "public_keys": {"mykey": KEY1},
        "keys": [{"name": "mykey", "type": "ssh", "data": KEY1}, {"name": "k2", "type": "ssh", "data": KEY2}],
        "random_seed": base64.b64encode(b"\x01\x02seed").decode(), "admin_pass": "s3cret",
        "launch_index": 0, "project_id": "p1", "meta": {"role": "web"},
    }


def make_tree(top, versions=("2012-08-10", "2018-08-27", "latest"), extra_version=None, md=None,
              vendor=None, vendor2=None, ec2=True):
    for version in versions:
        d = top / "openstack" / version
        d.mkdir(parents=True)
        (d / "meta_data.json").write_text(json.dumps(md or meta()) if not isinstance(md, str) else md)
        (d / "user_data").write_text(f"#cloud-config\nversion_read: '{version}'\n")
        (d / "vendor_data.json").write_text(json.dumps(
            vendor if vendor is not None else {"cloud-init": "#cloud-config\nvendor: one\n", "other": {}}))
        (d / "vendor_data2.json").write_text(json.dumps(vendor2 if vendor2 is not None else "#cloud-config\nv: 2\n"))
        (d / "network_data.json").write_text(json.dumps(NETWORK_DATA))
    if extra_version:  # a version newer than any we know: must not be chosen
        d = top / "openstack" / extra_version
        d.mkdir(parents=True)
        (d / "meta_data.json").write_text("{not even json")
    if ec2:
        d = top / "ec2" / "latest"
        d.mkdir(parents=True)
        (d / "meta-data.json").write_text(json.dumps({"instance-id": "i-00000001", "hostname": "cd-host"}))


def build_image(tmp_path, fs: str, tree) -> str:
    image = str(tmp_path / f"cd.{fs}")
    if fs == "iso9660":
        subprocess.run(["genisoimage", "-quiet", "-o", image, "-V", "config-2", "-J", "-R", str(tree)], check=True)
    else:
        subprocess.run(["truncate", "-s", "8M", image], check=True)
        subprocess.run(["mkfs.vfat", "-n", "CONFIG-2", image], check=True, capture_output=True)
        for entry in os.listdir(tree):
            subprocess.run(["mcopy", "-s", "-i", image, str(tree / entry), "::"], check=True)
    return image


@pytest.fixture
def attach():
    devices = []

    def do(image: str) -> str:
        dev = subprocess.run(["losetup", "-f", "--show", "-r", image], check=True, capture_output=True,
                             text=True).stdout.strip()
        devices.append(dev)
        return dev

    yield do
    for dev in devices:
        subprocess.run(["umount", dev], capture_output=True)
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def context(target, cfg=None):
    return DatasourceContext(root=target, cfg=cfg or {}, cmdline="", paths=Paths(target), stage=LOCAL)


@pytest.mark.parametrize("fs", ["iso9660", "vfat"])
def test_reads_a_real_config_drive(tmp_path, target, attach, fs):
    tree = tmp_path / "tree"
    make_tree(tree, extra_version="2099-01-01")
    dev = attach(build_image(tmp_path, fs, tree))
    from cloudseed.agent.datasources.configdrive import ConfigDrive

    ctx = context(target)
    assert ConfigDrive.detect(ctx)
    assert dev in ConfigDrive.why(ctx)
    search = find_datasource(ctx, ["ConfigDrive"])
    ds = search.datasource
    assert ds is not None, search.errors
    assert ds.instance_id == "b0fa911b-69d4-4476-bbe2-1c92bff6535c"
    assert ds.local_hostname == "cd-host.novalocal"
    assert ds.public_keys == [KEY1, KEY2]
    assert ds.random_seed == b"\x01\x02seed"
    assert ds.extra["admin_pass"] == "s3cret" and "admin_pass" not in ds.metadata
    assert ds.availability_zone == "nova-az1"
    assert ds.userdata_raw == b"#cloud-config\nversion_read: '2018-08-27'\n"
    assert ds.vendordata_raw == b"#cloud-config\nvendor: one\n"
    assert ds.vendordata2_raw == b"#cloud-config\nv: 2\n"
    assert ds.network_config == NETWORK_DATA
    assert ds.raw["ec2_metadata"]["instance-id"] == "i-00000001"
    assert ds.subplatform == f"config-disk ({dev})"
    # nothing left mounted
    with open("/proc/self/mounts") as f:
        assert dev not in f.read()


def test_only_an_old_version_directory(tmp_path, target, attach):
    tree = tmp_path / "tree"
    make_tree(tree, versions=("2015-10-15",), ec2=False,
              vendor={"cloud-init": [{"content": "#!/bin/sh\necho part\n"}]}, vendor2={"cloud-init": {"bad": 1}})
    attach(build_image(tmp_path, "iso9660", tree))
    from cloudseed.agent.datasources.configdrive import ConfigDrive

    ds = ConfigDrive(context(target))
    assert ds.fetch()
    assert ds.raw["version"] == "2015-10-15"
    assert ds.userdata_raw.endswith(b"'2015-10-15'\n")
    assert ds.vendordata_raw.startswith(b"#cloud-config-archive\n")
    assert json.loads(ds.vendordata_raw.split(b"\n", 1)[1]) == [{"content": "#!/bin/sh\necho part\n"}]
    assert ds.vendordata2_raw is None  # a mapping under cloud-init is not vendor-data
    assert "ec2_metadata" not in ds.raw


def test_truncated_meta_data_is_an_error_naming_the_file(tmp_path, target, attach):
    tree = tmp_path / "tree"
    make_tree(tree, versions=("latest",), md='{"uuid": "abc", "hostname": "x')
    dev = attach(build_image(tmp_path, "vfat", tree))
    search = find_datasource(context(target), ["ConfigDrive"])
    assert search.datasource is None
    assert len(search.errors) == 1
    assert f"{dev}/openstack/latest/meta_data.json: invalid JSON" in search.errors[0]


def test_meta_data_without_uuid_is_refused(tmp_path, target, attach):
    tree = tmp_path / "tree"
    md = meta()
    del md["uuid"]
    make_tree(tree, versions=("latest",), md=md)
    attach(build_image(tmp_path, "iso9660", tree))
    search = find_datasource(context(target), ["ConfigDrive"])
    assert search.datasource is None and "no 'uuid'" in search.errors[0]


def test_seed_directory_without_any_device(target):
    top = target.path("/var/lib/cloud/seed/config_drive")
    os.makedirs(top)
    from pathlib import Path

    make_tree(Path(top), versions=("latest",), ec2=False)
    from cloudseed.agent.datasources.configdrive import ConfigDrive

    ds = ConfigDrive(context(target))
    assert ds.fetch() and ds.subplatform.startswith("seed-dir")
    assert ds.instance_id == "b0fa911b-69d4-4476-bbe2-1c92bff6535c"


def test_network_data_converts_to_the_network_model(tmp_path, target, attach):
    from cloudseed import network

    tree = tmp_path / "tree"
    make_tree(tree, versions=("latest",))
    attach(build_image(tmp_path, "iso9660", tree))
    from cloudseed.agent.datasources.configdrive import ConfigDrive

    ds = ConfigDrive(context(target))
    assert ds.fetch()
    model = network.parse(ds.network_config, kind="openstack", macs={"fa:16:3e:00:00:01": "eth0"})
    assert "10.0.0.5" in repr(model)
