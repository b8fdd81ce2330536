"""Vultr's metadata API (``/v1.json``, ``/v1/``) from ``cloudseed serve``, on SQLite and PostgreSQL,
and Debian's cloud-init 22.4 DataSourceVultr reading it in namespaces.
"""

from __future__ import annotations

import ipaddress

import pytest

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces, ip
from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
VENDOR = "#cloud-config\npackages: [htop]\n"


def register(server, **extra):
    address = new_address()
    instance_id = f"vultr-{address.replace('.', '-')}"
    public = "45." + address.split(".", 1)[1]
    octets = address.split(".")
    v6 = f"2001:19f0:5:28a7:5400:3ff:{int(octets[2]):x}:{int(octets[3]):x}"
    fields = {"instance_id": instance_id, "hostname": "vultr-1", "availability_zone": "ewr-1",
              "addresses": [{"address": public, "network": "default", "mac": "56:00:03:1b:4e:ca", "public": True,
                             "prefix": 23},
                            {"address": v6, "network": "default",
                             "mac": "56:00:03:1b:4e:ca", "prefix": 64},
                            {"address": address, "network": "vpc-1", "mac": "5a:00:03:1b:4e:ca", "prefix": 20}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA, "vendor_data": VENDOR,
              "tags": {"web": ""},
              "clouds": {"vultr": {"country_code": "us", "startup_script": "#!/bin/sh\necho hi\n"}}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address, public, v6


def test_v1_json(server):
    instance_id, address, public, v6 = register(server)
    reply = server.get("/v1.json", address)
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    doc = reply.json()
    assert doc["instance-v2-id"] == instance_id == doc["instanceid"] and doc["hostname"] == "vultr-1"
    assert doc["public-keys"] == [KEY] and doc["user-data"] == USER_DATA and doc["vendor-data"] == [VENDOR]
    assert doc["region"] == {"regioncode": "EWR", "countrycode": "US"} and doc["tags"] == ["web"]
    assert doc["startup-script"] == "#!/bin/sh\necho hi\n"
    pub, private = doc["interfaces"]
    assert pub["network-type"] == "public" and pub["mac"] == "56:00:03:1b:4e:ca"
    gateway = str(ipaddress.ip_interface(f"{public}/23").network.network_address + 1)
    assert pub["ipv4"] == {"additional": [], "address": public, "netmask": "255.255.254.0", "gateway": gateway}
    assert pub["ipv6"] == {"additional": [], "address": v6,
                           "network": "2001:19f0:5:28a7::", "prefix": "64"}
    assert private["network-type"] == "private" and private["mtu"] == 1450
    assert private["ipv4"]["address"] == address and private["ipv4"]["netmask"] == "255.255.240.0"
    assert private["ipv4"]["gateway"] == "" and private["networkid"] == "vpc-1"


def test_path_tree(server):
    instance_id, address, public, _ = register(server)
    listing = server.get("/v1/", address).text.splitlines()
    assert {"hostname", "instanceid", "instance-v2-id", "public-keys", "region/", "interfaces/",
            "user-data", "vendor-data"} <= set(listing)
    assert server.get("/v1/hostname", address).text == "vultr-1"
    assert server.get("/v1/instanceid", address).text == instance_id
    assert server.get("/v1/public-keys", address).text == KEY + "\n"
    assert server.get("/v1/region/regioncode", address).text == "EWR"
    assert server.get("/v1/interfaces/", address).text == "0/\n1/\n"
    assert server.get("/v1/interfaces/0/ipv4/address", address).text == public
    assert server.get("/v1/interfaces/1/mtu", address).text == "1450"
    assert server.get("/v1/user-data", address).text == USER_DATA
    assert server.get("/v1/nothing", address).status == 404
    assert server.get("/v1/interfaces/7", address).status == 404
    assert server.get("/v1.json", address, method="POST").status == 405


def test_no_user_data_no_vendor_data_and_a_nic_without_ipv4(server):
    address = new_address()
    server.add(instance_id=f"vultr-bare-{address}", hostname="", availability_zone="ams",
               macs=["56:00:00:00:00:01", "5a:00:00:00:00:09"],
               addresses=[{"address": address, "network": "default"}])
    doc = server.get("/v1.json", address).json()
    assert doc["user-data"] == "" and doc["vendor-data"] == [] and doc["region"] == {"regioncode": "AMS"}
    pub, private = doc["interfaces"]
    assert pub["ipv4"]["address"] == address and pub["ipv4"]["netmask"] == "255.255.254.0"
    assert pub["ipv6"] == {"additional": [], "address": "", "network": "", "prefix": ""}
    assert private["unconfigured"] is True and private["ipv4"]["address"] == ""


def test_isolation_by_source_address(server):
    _, one, _, _ = register(server)
    _, two, _, _ = register(server, hostname="vultr-2", clouds={"vultr": {"instance_id": "29bea708-2e6e"}})
    assert server.get("/v1/hostname", one).text == "vultr-1"
    assert server.get("/v1/hostname", two).text == "vultr-2"
    assert server.get("/v1.json", two).json()["instance-v2-id"] == "29bea708-2e6e"
    assert server.get("/v1.json", new_address()).status == 404


def test_bad_settings_are_refused_naming_the_field(server):
    address = new_address()
    reply = server.admin("POST", "/v1/instances", {"instance_id": f"bad-{address}", "addresses": [
        {"address": address, "network": "default"}], "clouds": {"vultr": {"private_mtu": "big"}}})
    assert reply.status == 400 and "clouds.vultr.private_mtu" in reply.text


PRIVATE_MAC = "5a:00:03:1b:4e:cb"


@pytest.fixture(scope="module")
def vultr_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("vultr-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("vultr-ref-server")))
    # a second NIC in the guest: the VPC interface (cloud-init 22.4 refuses a MAC the system lacks)
    ip("-n", cloud.gst, "link", "add", "eth1", "address", PRIVATE_MAC, "type", "veth", "peer", "name", "vpcpeer")
    yield cloud
    cloud.close()


REFERENCE_VULTR = COMMON + """
from cloudinit.sources import DataSourceVultr as ds
import contextlib
ds.vultr.is_vultr = lambda: True  # the DMI check: this namespace is no Vultr instance
ds.vultr.EphemeralDHCPv4 = lambda *a, **k: contextlib.nullcontext()  # the namespace is configured already
src = ds.DataSourceVultr({"datasource": {"Vultr": {"retries": 1, "wait": 0}}}, distro, paths)
ok = src.get_data()
vendor, src.vendordata_raw = src.vendordata_raw, None  # a list: report() decodes text
report(src, ok, vendor_list=vendor)
"""


@pytest.mark.root
@pytest.mark.reference
def test_reference_vultr_datasource_reads_the_emulation(vultr_cloud, tmp_path):
    from cloudseed.provider.instance_data.vultr import metadata
    from cloudseed.provider.registry import InstanceRecord

    fields = dict(instance_id="29bea708-2e6e-480a-90ad-0e6b5d5ad62f", hostname="ref-vultr",
                  availability_zone="ewr", macs=[vultr_cloud.mac, PRIVATE_MAC],
                  addresses=[{"address": vultr_cloud.guest_ip, "network": "default", "prefix": 24},
                             {"address": "2001:19f0:5:28a7:5400:3ff:fe1b:4eca", "network": "default", "prefix": 64,
                              "mac": vultr_cloud.mac},
                             {"address": "2001:19f0:5:28a8::1", "network": "default", "prefix": 64,
                              "mac": vultr_cloud.mac},
                             {"address": "10.1.112.3", "network": "vpc-1", "prefix": 20, "mac": PRIVATE_MAC}],
                  user_data=USER_DATA, vendor_data=VENDOR, ssh_keys=[{"name": "k", "data": KEY}],
                  clouds={"vultr": {"country_code": "us", "private_mtu": 1400}})
    vultr_cloud.server.add(**fields)
    result = vultr_cloud.reference_in(REFERENCE_VULTR, str(tmp_path))
    assert result["ok"] is True
    assert result["instance_id"] == fields["instance_id"] and result["hostname"] == "ref-vultr"
    assert result["keys"] == [KEY] and result["userdata"] == USER_DATA and result["vendor_list"] == [VENDOR]
    assert result["metadata"]["region"] == "us"  # 22.4: the country code, lower case, wins over regioncode
    config = result["network_config"]
    assert config == {"version": 1, "config": [
        {"type": "nameserver", "address": ["108.61.10.10", "2001:19f0:300:1704::6"]},
        {"name": "eth0", "type": "physical", "mac_address": vultr_cloud.mac, "accept-ra": 1,
         "subnets": [{"type": "dhcp", "control": "auto"}, {"type": "ipv6_slaac", "control": "auto"},
                     {"type": "static6", "control": "auto", "address": "2001:19f0:5:28a8::/64"}]},
        {"name": "eth1", "type": "physical", "mac_address": PRIVATE_MAC, "mtu": 1400,
         "subnets": [{"type": "static", "control": "auto", "address": "10.1.112.3", "netmask": "255.255.240.0"}]}]}
    # our agent's conversion of the same document (derived in process) gives 22.4's network config
    from cloudseed.agent.datasources.vultr import network_config

    doc = metadata(InstanceRecord.from_dict(fields))
    assert network_config(doc, {vultr_cloud.mac: "eth0", PRIVATE_MAC: "eth1"}) == config


@pytest.mark.root
@pytest.mark.reference
def test_reference_vultr_datasource_without_user_data(vultr_cloud, tmp_path):
    vultr_cloud.server.admin("DELETE", "/v1/instances/29bea708-2e6e-480a-90ad-0e6b5d5ad62f")
    vultr_cloud.server.add(instance_id="vultr-bare", hostname="", availability_zone="ams-2",
                           macs=[vultr_cloud.mac], addresses=[{"address": vultr_cloud.guest_ip, "network": "default"}])
    result = vultr_cloud.reference_in(REFERENCE_VULTR, str(tmp_path))
    assert result["ok"] is True and result["instance_id"] == "vultr-bare"
    assert result["userdata"] is None and result["vendor_list"] == []
    assert result["metadata"]["region"] == "ams"  # no countrycode: regioncode, lower case
    assert result["metadata"]["local-hostname"] == "vultr-bare"  # the registry names a host without hostname
