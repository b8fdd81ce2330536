"""UpCloud's metadata API (``/metadata/v1.json``, ``/metadata/v1/``, answered for records with
``clouds.upcloud``) from ``cloudseed serve``, on SQLite and PostgreSQL, and Debian's cloud-init
22.4 DataSourceUpCloud reading it in namespaces.
"""

from __future__ import annotations

import pytest

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces
from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
VENDOR = "#cloud-config\npackages: [htop]\n"
UUID = "00133099-f1fd-4ed3-8d2c-8f8fb26a25f5"


def register(server, **extra):
    address = new_address()
    octets = address.split(".")
    floating = "94.237." + ".".join(octets[2:])
    fields = {"instance_id": f"uc-{address}", "hostname": "uc-1", "availability_zone": "fi-hel2",
              "addresses": [{"address": address, "network": "default", "mac": "32:d5:ba:4a:36:e7", "prefix": 22},
                            {"address": floating, "network": "default", "mac": "32:d5:ba:4a:36:e7",
                             "public": True},
                            {"address": f"10.6.{octets[2]}.{octets[3]}", "network": "utility",
                             "mac": "32:d5:ba:4a:84:cc", "prefix": 22}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA, "vendor_data": VENDOR,
              "tags": {"web": ""}, "clouds": {"upcloud": {}}}
    fields.update(extra)
    server.add(**fields)
    return fields["instance_id"], address, floating


def test_v1_json(server):
    instance_id, address, floating = register(server)
    reply = server.get("/metadata/v1.json", address)
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    doc = reply.json()
    assert doc["cloud_name"] == "upcloud" and doc["instance_id"] == instance_id and doc["hostname"] == "uc-1"
    assert doc["public_keys"] == [KEY] and doc["user_data"] == USER_DATA and doc["vendor_data"] == VENDOR
    assert doc["region"] == "fi-hel2" and doc["tags"] == ["web"]
    public, utility = doc["network"]["interfaces"]
    assert doc["network"]["dns"] == ["94.237.127.9", "94.237.40.9"]
    assert public["index"] == 1 and public["type"] == "public" and public["mac"] == "32:d5:ba:4a:36:e7"
    first, second = public["ip_addresses"]
    assert first["address"] == address and first["dhcp"] is True and first["family"] == "IPv4"
    assert first["network"].endswith("/22") and first["dns"] == doc["network"]["dns"] and not first["floating"]
    assert second == {"address": floating, "dhcp": False, "dns": [], "family": "IPv4", "floating": True,
                      "gateway": "", "network": f"{floating}/32"}
    assert utility["index"] == 2 and utility["type"] == "utility" and utility["ip_addresses"][0]["dns"] == []


def test_path_tree_and_routing(server):
    instance_id, address, _ = register(server)
    assert {"instance_id", "hostname", "network/", "public_keys", "user_data"} <= set(
        server.get("/metadata/v1/", address).text.splitlines())
    assert server.get("/metadata/v1/instance_id", address).text == instance_id
    assert server.get("/metadata/v1/network/interfaces/0/mac", address).text == "32:d5:ba:4a:36:e7"
    assert server.get("/metadata/v1/network/interfaces/0/ip_addresses/1/floating", address).text == "true"
    assert server.get("/metadata/v1/nothing", address).status == 404
    assert server.get("/metadata/v1.json", address, method="PUT").status == 405
    # the same path answers DigitalOcean's document for a record without clouds.upcloud
    other = new_address()
    server.add(instance_id=f"do-{other}", addresses=[{"address": other, "network": "default"}])
    assert "droplet_id" in server.get("/metadata/v1.json", other).json()
    assert server.get("/metadata/v1.json", new_address()).status == 404


def test_settings(server):
    _, address, _ = register(server, clouds={"upcloud": {"instance_id": UUID, "region": "de-fra1",
                                                         "nameservers": ["1.1.1.1"]}}, user_data=None,
                             vendor_data={"packages": ["htop"]})
    doc = server.get("/metadata/v1.json", address).json()
    assert doc["instance_id"] == UUID and doc["region"] == "de-fra1" and doc["network"]["dns"] == ["1.1.1.1"]
    assert doc["user_data"] == "" and doc["vendor_data"] == '#cloud-config\n{"packages": ["htop"]}'
    reply = server.admin("POST", "/v1/instances", {"instance_id": "uc-bad", "addresses": [
        {"address": new_address(), "network": "default"}], "clouds": {"upcloud": {"nameservers": "1.1.1.1"}}})
    assert reply.status == 400 and "clouds.upcloud.nameservers" in reply.text


def test_a_host_route_and_an_address_without_mac(server):
    address = new_address()
    server.add(instance_id=f"uc-h-{address}", clouds={"upcloud": {}},
               addresses=[{"address": address, "network": "default", "prefix": 32}])
    doc = server.get("/metadata/v1.json", address).json()
    assert doc["network"]["interfaces"] == []  # no MAC: no interface to describe
    other = new_address()
    server.add(instance_id=f"uc-h-{other}", clouds={"upcloud": {}}, macs=["32:d5:ba:00:00:01"],
               addresses=[{"address": other, "network": "default", "prefix": 32}])
    address_doc = server.get("/metadata/v1.json", other).json()["network"]["interfaces"][0]["ip_addresses"][0]
    assert address_doc["network"] == f"{other}/32" and address_doc["gateway"] == ""


@pytest.fixture(scope="module")
def uc_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("uc-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("uc-ref-server")))
    yield cloud
    cloud.close()


@pytest.mark.root
@pytest.mark.reference
def test_reference_upcloud_datasource_reads_the_emulation(uc_cloud, tmp_path):
    fields = dict(instance_id="uc-ref", hostname="ref-uc", availability_zone="uk-lon1",
                  addresses=[{"address": uc_cloud.guest_ip, "network": "default", "prefix": 24},
                             {"address": "2a04:3545:1000:720::5", "network": "default", "prefix": 64,
                              "mac": uc_cloud.mac},
                             {"address": "94.237.105.50", "network": "default", "public": True, "mac": uc_cloud.mac}],
                  macs=[uc_cloud.mac], user_data=USER_DATA, vendor_data=VENDOR,
                  ssh_keys=[{"name": "k", "data": KEY}], clouds={"upcloud": {"instance_id": UUID}})
    uc_cloud.server.add(**fields)
    result = uc_cloud.reference_in(COMMON + f"""
from cloudinit.sources import DataSourceUpCloud as ds
src = ds.DataSourceUpCloud({{"datasource": {{"UpCloud": {{"retries": 1}}}}}}, distro, paths)
src._get_sysinfo = lambda: (True, "{UUID}")  # the DMI check: this namespace is no UpCloud server
report(src, src.get_data())
""", str(tmp_path))
    assert result["ok"] is True
    assert result["instance_id"] == UUID and result["hostname"] == "ref-uc"
    assert result["keys"] == [KEY] and result["userdata"] == USER_DATA and result["vendordata"] == VENDOR
    assert result["metadata"]["availability_zone"] == "uk-lon1"
    assert result["network_config"] == {"version": 1, "config": [
        {"type": "physical", "name": "eth0", "mac_address": uc_cloud.mac,
         "subnets": [{"type": "dhcp"}, {"type": "ipv6_dhcpv6-stateless"},
                     {"type": "static", "control": "auto", "address": "94.237.105.50", "netmask": "32"}]},
        {"type": "nameserver", "address": ["94.237.127.9", "94.237.40.9"]}]}
    # our agent's conversion of the same document (derived in process) gives 22.4's network config
    from cloudseed.agent.datasources.upcloud import network_config
    from cloudseed.provider.instance_data.upcloud import metadata
    from cloudseed.provider.registry import InstanceRecord

    doc = metadata(InstanceRecord.from_dict(fields))
    assert network_config(doc["network"], {uc_cloud.mac: "eth0"}) == result["network_config"]
