"""Seed images read back with real tools: labels with blkid, files with isoinfo and mtools, fsck."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from cloudseed.provider.seeds.build import build_seed
from cloudseed.provider.seeds.errors import SeedError
from tests.provider.seeds.images import KEY, USER_DATA, blkid, build, extract, sample_spec, tree


@pytest.mark.parametrize("fs,label,fstype", [("iso9660", "cidata", "iso9660"), ("vfat", "CIDATA", "vfat")])
def test_nocloud_seed_has_label_and_files(tmp_path, fs, label, fstype):
    image = build(tmp_path, "nocloud", fs)
    info = blkid(image)
    assert info["LABEL"] == label and info["TYPE"] == fstype
    files = tree(extract(image, fs, str(tmp_path / "x")))
    assert set(files) == {"meta-data", "user-data", "vendor-data"}
    meta = yaml.safe_load(files["meta-data"])
    assert meta == {"instance-id": "iid-seed-0001", "local-hostname": "seeded", "public-keys": [KEY]}
    assert files["user-data"] == USER_DATA
    assert files["vendor-data"].startswith(b"#cloud-config\nruncmd: [echo vendor]")


@pytest.mark.parametrize("fs,label", [("iso9660", "config-2"), ("vfat", "CONFIG-2")])
def test_config_drive_layout(tmp_path, fs, label):
    image = build(tmp_path, "configdrive", fs)
    assert blkid(image)["LABEL"] == label
    files = tree(extract(image, fs, str(tmp_path / "x")))
    meta = json.loads(files["openstack/latest/meta_data.json"])
    assert meta["uuid"] == "iid-seed-0001" and meta["hostname"] == "seeded"
    assert meta["public_keys"] == {"lab": KEY}
    assert files["openstack/latest/user_data"] == USER_DATA
    assert json.loads(files["openstack/latest/vendor_data.json"])["cloud-init"].startswith("#cloud-config")
    assert json.loads(files["openstack/latest/vendor_data2.json"]) == {}
    assert "networks" in json.loads(files["openstack/latest/network_data.json"])
    # versions only carry the files that existed in them, as Nova writes them
    assert "openstack/2012-08-10/meta_data.json" in files
    assert "openstack/2012-08-10/network_data.json" not in files
    assert "openstack/2015-10-15/network_data.json" in files
    assert "openstack/2016-10-06/vendor_data2.json" in files
    ec2 = json.loads(files["ec2/latest/meta-data.json"])
    assert ec2["instance-id"] == "iid-seed-0001"
    assert ec2["public-keys"]["0"]["openssh-key"] == KEY
    assert files["ec2/2009-04-04/user-data"] == USER_DATA


def test_iso_has_joliet_and_rock_ridge_names(tmp_path):
    image = build(tmp_path, "configdrive", "iso9660")
    joliet = subprocess.run(["isoinfo", "-J", "-f", "-i", image], capture_output=True, text=True).stdout
    rock = subprocess.run(["isoinfo", "-R", "-f", "-i", image], capture_output=True, text=True).stdout
    plain = subprocess.run(["isoinfo", "-f", "-i", image], capture_output=True, text=True).stdout
    assert "/openstack/latest/meta_data.json" in joliet.splitlines()
    assert "/openstack/latest/meta_data.json" in rock.splitlines()
    # the plain ISO 9660 names are the mangled interchange-level names
    assert any(line.startswith("/OPENSTACK/LATEST/META_DATA.JSO") for line in plain.splitlines())


def test_vfat_image_passes_fsck(tmp_path):
    image = build(tmp_path, "configdrive", "vfat")
    proc = subprocess.run(["fsck.vfat", "-n", image], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("kind", ["nocloud", "configdrive"])
@pytest.mark.parametrize("fs", ["iso9660", "vfat"])
def test_same_input_gives_same_bytes(tmp_path, monkeypatch, kind, fs):
    first = build(tmp_path, kind, fs, name="a")
    monkeypatch.setenv("TZ", "America/New_York")  # neither the clock nor the zone leaks in
    second = build(tmp_path, kind, fs, name="b")
    with open(first, "rb") as a, open(second, "rb") as b:
        assert a.read() == b.read()
    third = build(tmp_path, kind, fs, sample_spec(hostname="other"), name="c")
    with open(first, "rb") as a, open(third, "rb") as c:
        assert a.read() != c.read()


def test_vfat_size_limit_is_a_clear_error_and_old_image_survives(tmp_path):
    out = str(tmp_path / "seed.vfat")
    build_seed("configdrive", "vfat", sample_spec(), out)
    with open(out, "rb") as handle:
        before = handle.read()
    huge = sample_spec(user_data=os.urandom(40 * 1024 * 1024))  # x2 (openstack + ec2 trees) > 64 MiB
    with pytest.raises(SeedError, match=r"at most 64 MiB; use --fs iso9660"):
        build_seed("configdrive", "vfat", huge, out)
    with open(out, "rb") as handle:
        assert handle.read() == before
    assert [p for p in os.listdir(tmp_path) if p.startswith(".seed-")] == []
