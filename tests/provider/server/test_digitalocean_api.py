"""DigitalOcean's droplet metadata API (``/metadata/v1.json``, ``/metadata/v1/``) from ``cloudseed serve``,
on SQLite and PostgreSQL, and Debian's cloud-init 22.4 DataSourceDigitalOcean reading it in namespaces.
"""

from __future__ import annotations

import pytest

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces
from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
VENDOR = "#cloud-config\npackages: [htop]\n"


def register(server, **extra):
    address = new_address()
    instance_id = f"do-{address.replace('.', '-')}"
    public = "45." + address.split(".", 1)[1]
    fields = {"instance_id": instance_id, "hostname": "droplet-1", "availability_zone": "nyc3",
              "addresses": [{"address": public, "network": "default", "mac": "04:01:58:27:7f:01", "public": True,
                             "prefix": 19},
                            {"address": address, "network": "default", "mac": "04:01:58:27:7f:02", "prefix": 16}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA, "vendor_data": VENDOR,
              "tags": {"web": "", "prod": ""},
              "clouds": {"digitalocean": {"droplet_id": 2756294, "floating_ip": "138.197.1.1",
                                          "anchor_ipv4": {"ip_address": "10.17.0.9", "netmask": "255.255.0.0",
                                                          "gateway": "10.17.0.1"},
                                          "features": {"dhcp_enabled": False}}}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address, public


def test_v1_json(server):
    _, address, public = register(server)
    reply = server.get("/metadata/v1.json", address)
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    doc = reply.json()
    assert doc["droplet_id"] == 2756294 and doc["hostname"] == "droplet-1" and doc["region"] == "nyc3"
    assert doc["public_keys"] == [KEY] and doc["user_data"] == USER_DATA and doc["vendor_data"] == VENDOR
    pub = doc["interfaces"]["public"][0]
    assert pub["mac"] == "04:01:58:27:7f:01" and pub["type"] == "public"
    assert pub["ipv4"]["ip_address"] == public and pub["ipv4"]["netmask"] == "255.255.224.0"
    assert pub["anchor_ipv4"] == {"ip_address": "10.17.0.9", "netmask": "255.255.0.0", "gateway": "10.17.0.1"}
    private = doc["interfaces"]["private"][0]
    assert private["ipv4"]["ip_address"] == address and private["ipv4"]["netmask"] == "255.255.0.0"
    assert doc["floating_ip"] == {"ipv4": {"active": True, "ip_address": "138.197.1.1"}}
    assert doc["dns"]["nameservers"] and doc["tags"] == ["prod", "web"] and doc["features"] == {"dhcp_enabled": False}


def test_path_tree(server):
    _, address, public = register(server)
    listing = server.get("/metadata/v1/", address).text.splitlines()
    assert {"id", "hostname", "user-data", "vendor-data", "public-keys", "region", "interfaces/", "dns/",
            "floating_ip/", "tags", "features/"} <= set(listing)
    assert server.get("/metadata/v1/id", address).text == "2756294"
    assert server.get("/metadata/v1/hostname", address).text == "droplet-1"
    assert server.get("/metadata/v1/user-data", address).text == USER_DATA
    assert server.get("/metadata/v1/vendor-data", address).text == VENDOR
    assert server.get("/metadata/v1/public-keys", address).text == KEY + "\n"
    assert server.get("/metadata/v1/interfaces/", address).text.splitlines() == ["public/", "private/"]
    assert server.get("/metadata/v1/interfaces/public/0/ipv4/address", address).text == public
    assert server.get("/metadata/v1/interfaces/public/0/anchor_ipv4/address", address).text == "10.17.0.9"
    assert server.get("/metadata/v1/interfaces/private/0/mac", address).text == "04:01:58:27:7f:02"
    assert server.get("/metadata/v1/floating_ip/ipv4/active", address).text == "true"
    assert server.get("/metadata/v1/features/dhcp_enabled", address).text == "false"
    assert server.get("/metadata/v1/nothing", address).status == 404
    assert server.get("/metadata/v1/id", address, method="POST").status == 405


def test_isolation_by_source_address(server):
    _, one, _ = register(server)
    _, two, _ = register(server, hostname="droplet-2", clouds={"digitalocean": {"droplet_id": 99}})
    assert server.get("/metadata/v1/hostname", one).text == "droplet-1"
    assert server.get("/metadata/v1/hostname", two).text == "droplet-2"
    assert server.get("/metadata/v1.json", two).json()["droplet_id"] == 99
    assert server.get("/metadata/v1.json", new_address()).status == 404


@pytest.fixture(scope="module")
def do_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("do-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("do-ref-server")))
    yield cloud
    cloud.close()


@pytest.mark.root
@pytest.mark.reference
def test_reference_digitalocean_datasource_reads_the_emulation(do_cloud, tmp_path):
    do_cloud.server.add(instance_id="do-ref", hostname="ref-droplet", availability_zone="ams3",
                        addresses=[{"address": do_cloud.guest_ip, "network": "default", "prefix": 24}],
                        macs=[do_cloud.mac], user_data=USER_DATA, vendor_data=VENDOR,
                        ssh_keys=[{"name": "k", "data": KEY}],
                        clouds={"digitalocean": {"droplet_id": 31337}})
    result = do_cloud.reference_in(COMMON + """
from cloudinit.sources import DataSourceDigitalOcean as ds
src = ds.DataSourceDigitalOcean({"datasource": {"DigitalOcean": {"use_ip4LL": False, "retries": 1}}}, distro, paths)
src._get_sysinfo = lambda: (True, "31337")  # the DMI check: this namespace is no droplet
report(src, src.get_data())
""", str(tmp_path))
    assert result["ok"] is True
    assert result["instance_id"] == "31337" and result["hostname"] == "ref-droplet"
    assert result["keys"] == [KEY] and result["userdata"] == USER_DATA and result["vendordata"] == VENDOR
    assert result["availability_zone"] == "ams3"
    physical = [c for c in result["network_config"]["config"] if c["type"] == "physical"]
    assert physical == [{"type": "physical", "mac_address": do_cloud.mac, "name": "eth0",
                         "subnets": [{"type": "static", "control": "auto", "address": do_cloud.guest_ip,
                                      "gateway": do_cloud.guest_ip.rsplit(".", 1)[0] + ".1",
                                      "netmask": "255.255.255.0"}]}]
