"""Alibaba Cloud ECS's metadata API (``/2016-01-01/meta-data/...``) from ``cloudseed serve``, on
SQLite and PostgreSQL, and Debian's cloud-init 22.4 DataSourceAliYun reading it at
100.100.100.200 in namespaces.
"""

from __future__ import annotations

import json

import pytest

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces
from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
KEY2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAHSFCj bob@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
MAC = "00:16:3e:00:00:01"


def register(server, **extra):
    address = new_address()
    instance_id = f"i-{address.replace('.', '')}"
    fields = {"instance_id": instance_id, "hostname": "ecs-vm", "availability_zone": "cn-hangzhou-h",
              "addresses": [{"address": address, "network": "vsw-a", "mac": MAC, "prefix": 24}],
              "ssh_keys": [{"name": "alice", "data": KEY}, {"name": "bob", "data": KEY2}],
              "user_data": USER_DATA, "instance_type": "ecs.g6.large",
              "clouds": {"aliyun": {"image_id": "ubuntu_22_04_x64_20G_alibase_20240101.vhd"}}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address


def test_metadata_tree(server):
    instance_id, address = register(server)
    base = "/2016-01-01/meta-data"
    listing = server.get(f"{base}/", address).text.split("\n")
    for entry in ("hostname", "instance-id", "image-id", "region-id", "zone-id", "public-keys/", "network/",
                  "instance/", "mac", "private-ipv4", "vpc-id", "vswitch-id"):
        assert entry in listing, entry
    assert server.get(f"{base}/instance-id", address).text == instance_id
    assert server.get(f"{base}/hostname", address).text == "ecs-vm"
    assert server.get(f"{base}/region-id", address).text == "cn-hangzhou"
    assert server.get(f"{base}/zone-id", address).text == "cn-hangzhou-h"
    assert server.get(f"{base}/image-id", address).text == "ubuntu_22_04_x64_20G_alibase_20240101.vhd"
    assert server.get(f"{base}/instance/instance-type", address).text == "ecs.g6.large"
    assert server.get(f"{base}/public-keys/", address).text.split() == ["0/", "1/"]
    assert server.get(f"{base}/public-keys/1/openssh-key", address).text == KEY2
    assert server.get(f"{base}/mac", address).text == MAC
    nic = f"{base}/network/interfaces/macs/{MAC}"
    assert server.get(f"{nic}/primary-ip-address", address).text == address
    assert json.loads(server.get(f"{nic}/private-ipv4s", address).text) == [address]
    assert server.get(f"{nic}/netmask", address).text == "255.255.255.0"
    assert server.get("/2016-01-01/user-data", address).text == USER_DATA
    assert server.get("/latest/meta-data/instance-id", address).text == instance_id
    assert server.get(f"{base}/nothing", address).status == 404
    assert server.get("/2009-04-04/meta-data/instance-id", address).status == 404


def test_region_setting_and_no_keys(server):
    _, address = register(server, ssh_keys=[], clouds={"aliyun": {"region_id": "eu-central-1"}})
    assert server.get("/2016-01-01/meta-data/region-id", address).text == "eu-central-1"
    assert server.get("/2016-01-01/meta-data/public-keys/", address).status == 404


def test_unknown_aliyun_setting_is_refused(server):
    reply = server.admin("POST", "/v1/instances", {"instance_id": "i-bad", "clouds": {"aliyun": {"regionid": "x"}}})
    assert reply.status == 400 and "clouds.aliyun.regionid" in reply.text


@pytest.fixture(scope="module")
def ali_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("ali-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("ali-ref-server")), metadata_ip="100.100.100.200")
    yield cloud
    cloud.close()


REFERENCE = COMMON + """
from cloudinit.sources import DataSourceAliYun as ds
ds._is_aliyun = lambda: True  # the DMI check: this namespace is no ECS instance
src = ds.DataSourceAliYun({"datasource": {"AliYun": {"max_wait": 10, "timeout": 5}}}, distro, paths)
report(src, src.get_data(), cloud=src.cloud_name)
"""


@pytest.mark.root
@pytest.mark.reference
def test_reference_aliyun_reads_the_emulation(ali_cloud, tmp_path):
    ali_cloud.server.admin("DELETE", "/v1/instances/i-ref1")
    ali_cloud.server.add(instance_id="i-ref1", hostname="ref-ecs", availability_zone="cn-shanghai-b",
                         addresses=[{"address": ali_cloud.guest_ip, "network": "vsw", "mac": ali_cloud.mac,
                                     "prefix": 24}],
                         user_data=USER_DATA, ssh_keys=[{"name": "k", "data": KEY}, {"name": "k2", "data": KEY2}],
                         clouds={"aliyun": {}})
    result = ali_cloud.reference_in(REFERENCE, str(tmp_path))
    assert result["ok"] is True and result["cloud"] == "aliyun"
    assert result["instance_id"] == "i-ref1" and result["hostname"] == "ref-ecs"
    assert sorted(result["keys"]) == sorted([KEY, KEY2]) and result["userdata"] == USER_DATA
    assert result["metadata"]["region-id"] == "cn-shanghai" and result["metadata"]["zone-id"] == "cn-shanghai-b"
    config = result["network_config"]
    assert config["version"] == 2
    (entry,) = config["ethernets"].values()
    assert entry["match"]["macaddress"] == ali_cloud.mac and entry["dhcp4"] is True
