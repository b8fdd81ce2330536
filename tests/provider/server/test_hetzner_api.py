"""Hetzner Cloud's metadata API (``/hetzner/v1/...``) from ``cloudseed serve``, on SQLite and
PostgreSQL, and Debian's cloud-init 22.4 DataSourceHetzner reading it in namespaces.
"""

from __future__ import annotations

import base64

import pytest
import yaml

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces
from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
VENDOR = "#cloud-config\npackages: [htop]\n"


def register(server, **extra):
    address = new_address()
    octets = address.split(".")
    instance_id = "".join(f"{int(p):03d}" for p in octets)
    v6 = f"2a01:4f8:{octets[2]}:{octets[3]}::1"
    private = "10.0." + address.split(".", 2)[2]
    fields = {"instance_id": instance_id, "hostname": "hz-1", "availability_zone": "fsn1-dc14",
              "addresses": [{"address": address, "network": "default", "mac": "96:00:00:00:00:01"},
                            {"address": v6, "network": "default", "mac": "96:00:00:00:00:01",
                             "prefix": 64},
                            {"address": private, "network": "nw-test1", "mac": "86:00:00:00:00:02",
                             "prefix": 24}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA, "vendor_data": VENDOR,
              "clouds": {"hetzner": {"region": "eu-central"}}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address, private


def test_metadata_yaml(server):
    instance_id, address, _ = register(server)
    v6 = f"2a01:4f8:{address.split('.')[2]}:{address.split('.')[3]}::1"
    reply = server.get("/hetzner/v1/metadata", address)
    assert reply.status == 200
    doc = yaml.safe_load(reply.text)
    assert doc["instance-id"] == int(instance_id) and doc["hostname"] == "hz-1"
    assert doc["public-keys"] == [KEY] and doc["vendor_data"] == VENDOR
    assert doc["region"] == "eu-central" and doc["availability-zone"] == "fsn1-dc14"
    assert doc["public-ipv4"] == address
    nic = doc["network-config"]["config"][0]
    assert doc["network-config"]["version"] == 1 and nic["mac_address"] == "96:00:00:00:00:01"
    assert nic["name"] == "eth0" and nic["subnets"][0]["type"] == "dhcp"
    assert nic["subnets"][1] == {"type": "static", "ipv6": True, "gateway": "fe80::1",
                                 "address": f"{v6}/64",
                                 "dns_nameservers": ["2a01:4ff:ff00::add:2", "2a01:4ff:ff00::add:1"]}
    assert server.get("/hetzner/v1/metadata/instance-id", address).text == instance_id
    assert server.get("/hetzner/v1/metadata/hostname", address).text == "hz-1"
    assert yaml.safe_load(server.get("/hetzner/v1/metadata/public-keys", address).text) == [KEY]
    assert server.get("/hetzner/v1/metadata/nothing", address).status == 404


def test_userdata_and_private_networks(server):
    _, address, private = register(server)
    assert server.get("/hetzner/v1/userdata", address).text == USER_DATA
    networks = yaml.safe_load(server.get("/hetzner/v1/metadata/private-networks", address).text)
    assert networks == [{"ip": private, "alias_ips": [], "interface_num": 1, "mac_address": "86:00:00:00:00:02",
                         "network_id": networks[0]["network_id"], "network_name": "nw-test1",
                         "network": private.rsplit(".", 1)[0] + ".0/24", "subnet": private.rsplit(".", 1)[0] + ".0/24",
                         "gateway": private.rsplit(".", 1)[0] + ".1"}]
    _, other, _ = register(server, user_data=None)
    assert server.get("/hetzner/v1/userdata", other).text == ""
    assert server.get("/hetzner/v1/userdata", address, method="POST").status == 405


def test_isolation_by_source_address(server):
    one_id, one, _ = register(server)
    two_id, two, _ = register(server, hostname="hz-2")
    assert server.get("/hetzner/v1/metadata/instance-id", one).text == one_id
    assert server.get("/hetzner/v1/metadata/instance-id", two).text == two_id
    assert server.get("/hetzner/v1/metadata/hostname", two).text == "hz-2"
    assert server.get("/hetzner/v1/metadata", new_address()).status == 404


@pytest.fixture(scope="module")
def hz_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("hz-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("hz-ref-server")))
    yield cloud
    cloud.close()


@pytest.mark.root
@pytest.mark.reference
@pytest.mark.parametrize("encoded", [False, True])
def test_reference_hetzner_datasource_reads_the_emulation(hz_cloud, tmp_path, encoded):
    hz_cloud.server.admin("DELETE", "/v1/instances/4711")
    user_data = base64.b64encode(USER_DATA.encode()).decode() if encoded else USER_DATA
    hz_cloud.server.add(instance_id="4711", hostname="ref-hz", availability_zone="hel1-dc2",
                        addresses=[{"address": hz_cloud.guest_ip, "network": "default"}], macs=[hz_cloud.mac],
                        user_data=user_data, vendor_data=VENDOR, ssh_keys=[{"name": "k", "data": KEY}])
    result = hz_cloud.reference_in(COMMON + """
from cloudinit.sources import DataSourceHetzner as ds
import contextlib
ds.get_hcloud_data = lambda: (True, "4711")  # the DMI check: this namespace is no Hetzner server
ds.EphemeralDHCPv4 = lambda *a, **k: contextlib.nullcontext()  # the namespace is configured already
src = ds.DataSourceHetzner({"datasource": {"Hetzner": {"retries": 1}}}, distro, paths)
report(src, src.get_data())
""", str(tmp_path))
    assert result["ok"] is True
    assert result["instance_id"] == "4711" and result["hostname"] == "ref-hz"
    assert result["keys"] == [KEY] and result["userdata"] == USER_DATA and result["vendordata"] == VENDOR
    config = result["network_config"]
    assert config["version"] == 1 and config["config"][0]["mac_address"] == hz_cloud.mac
    assert config["config"][0]["subnets"][0]["type"] == "dhcp"
