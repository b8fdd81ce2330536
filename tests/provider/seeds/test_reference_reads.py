"""Differential check: Debian's cloud-init 22.4 reads our seeds (extracted with real tools)."""

from __future__ import annotations

import json

import pytest

from tests.provider.seeds.images import KEY, USER_DATA, build, extract
from tests.reference import reference_python

pytestmark = pytest.mark.reference

_READ_CONFIG_DRIVE = """
import json, sys
from cloudinit.sources.DataSourceConfigDrive import read_config_drive
res = read_config_drive(sys.argv[1])
print(json.dumps({"version": res.get("version"), "metadata": res["metadata"],
                  "userdata": res["userdata"].decode() if isinstance(res["userdata"], bytes) else res["userdata"],
                  "vendordata": res.get("vendordata"), "networkdata": res.get("networkdata"),
                  "ec2": res.get("ec2-metadata")}, default=str))
"""

_READ_NOCLOUD = """
import json, sys
from cloudinit import util
md, ud, vd = util.read_seeded(sys.argv[1] + "/", timeout=1, retries=0)
print(json.dumps({"md": md, "ud": ud.decode(), "vd": vd.decode() if vd else None}))
"""


@pytest.mark.parametrize("fs", ["iso9660", "vfat"])
def test_reference_reads_config_drive(tmp_path, fs):
    image = build(tmp_path, "configdrive", fs)
    tree = extract(image, fs, str(tmp_path / "drive"))
    got = json.loads(reference_python(_READ_CONFIG_DRIVE, tree).stdout)
    assert got["version"] == 2
    assert got["metadata"]["instance-id"] == "iid-seed-0001"
    assert got["metadata"]["local-hostname"] == "seeded"
    assert got["metadata"]["public_keys"] == {"lab": KEY}
    assert got["userdata"] == USER_DATA.decode()
    assert got["vendordata"]["cloud-init"].startswith("#cloud-config")
    assert got["networkdata"]["links"] == []
    assert got["ec2"]["instance-id"] == "iid-seed-0001"


@pytest.mark.parametrize("fs", ["iso9660", "vfat"])
def test_reference_reads_nocloud_seed(tmp_path, fs):
    image = build(tmp_path, "nocloud", fs)
    tree = extract(image, fs, str(tmp_path / "seed"))
    got = json.loads(reference_python(_READ_NOCLOUD, tree).stdout)
    assert got["md"]["instance-id"] == "iid-seed-0001"
    assert got["md"]["local-hostname"] == "seeded"
    assert got["md"]["public-keys"] == [KEY]
    assert got["ud"] == USER_DATA.decode()
    assert got["vd"].startswith("#cloud-config")
