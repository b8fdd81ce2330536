"""NWCS's metadata API (``/api/v1/metadata``) from ``cloudseed serve``, on SQLite and PostgreSQL,
and Debian's cloud-init 22.4 DataSourceNWCS reading it in namespaces.
"""

from __future__ import annotations

import ipaddress

import pytest

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces
from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
VENDOR = "#cloud-config\npackages: [htop]\n"


def register(server, **extra):
    address = new_address()
    octets = address.split(".")
    fields = {"instance_id": f"nwcs-{address}", "hostname": "nwcs-1",
              "addresses": [{"address": address, "network": "default", "mac": "52:54:00:aa:00:01", "prefix": 24},
                            {"address": f"2a0b:4342:1a33:{int(octets[2]):x}::{int(octets[3]):x}",
                             "network": "default", "mac": "52:54:00:aa:00:01", "prefix": 64},
                            {"address": f"10.9.{octets[2]}.{octets[3]}", "network": "private",
                             "mac": "52:54:00:aa:00:02"}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA, "vendor_data": VENDOR}
    fields.update(extra)
    server.add(**fields)
    return fields["instance_id"], address


def test_metadata_document(server):
    instance_id, address = register(server)
    reply = server.get("/api/v1/metadata", address)
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    doc = reply.json()
    assert doc["instance-id"] == instance_id and doc["hostname"] == "nwcs-1" and doc["public-keys"] == [KEY]
    assert doc["userdata"] == USER_DATA and doc["vendordata"] == VENDOR
    net = ipaddress.ip_interface(f"{address}/24").network
    v6 = doc["network"]["config"][0]["subnets"][1]["address"]
    assert doc["network"] == {"version": 1, "config": [
        {"type": "physical", "name": "eth0", "mac_address": "52:54:00:aa:00:01",
         "subnets": [{"type": "static", "address": f"{address}/24", "gateway": str(net.network_address + 1),
                      "dns_nameservers": ["9.9.9.9", "149.112.112.112"]},
                     {"type": "static", "address": v6}]},
        {"type": "physical", "name": "eth1", "mac_address": "52:54:00:aa:00:02", "subnets": [{"type": "dhcp"}]}]}
    assert v6.endswith("/64")


def test_keys_and_errors(server):
    instance_id, address = register(server)
    assert server.get("/api/v1/metadata/instance-id", address).text == instance_id
    assert server.get("/api/v1/metadata/hostname", address).text == "nwcs-1"
    assert server.get("/api/v1/metadata/public-keys", address).text == KEY + "\n"
    assert server.get("/api/v1/metadata/userdata", address).text == USER_DATA
    assert server.get("/api/v1/metadata/network/config/0/mac_address", address).text == "52:54:00:aa:00:01"
    assert server.get("/api/v1/", address).text == "metadata\n"
    assert server.get("/api/v1/metadata/nothing", address).status == 404
    assert server.get("/api/v1/other", address).status == 404
    assert server.get("/api/v1/metadata", address, method="POST").status == 405
    assert server.get("/api/v1/metadata", new_address()).status == 404


def test_no_user_data_and_nameservers_setting(server):
    _, address = register(server, user_data=None, vendor_data=None, clouds={"nwcs": {"nameservers": ["1.1.1.1"]}})
    doc = server.get("/api/v1/metadata", address).json()
    assert doc["userdata"] is None and doc["vendordata"] is None
    assert doc["network"]["config"][0]["subnets"][0]["dns_nameservers"] == ["1.1.1.1"]
    assert server.get("/api/v1/metadata/userdata", address).text == ""


@pytest.fixture(scope="module")
def nwcs_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("nwcs-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("nwcs-ref-server")))
    yield cloud
    cloud.close()


@pytest.mark.root
@pytest.mark.reference
def test_reference_nwcs_datasource_reads_the_emulation(nwcs_cloud, tmp_path):
    fields = dict(instance_id="nwcs-ref", hostname="ref-nwcs",
                  addresses=[{"address": nwcs_cloud.guest_ip, "network": "default", "prefix": 24}],
                  macs=[nwcs_cloud.mac, "52:54:00:aa:00:09"], user_data=USER_DATA, vendor_data=VENDOR,
                  ssh_keys=[{"name": "k", "data": KEY}])
    nwcs_cloud.server.add(**fields)
    result = nwcs_cloud.reference_in(COMMON + """
from cloudinit.sources import DataSourceNWCS as ds
import contextlib
ds.get_nwcs_data = lambda: True  # the DMI check: this namespace is no NWCS server
ds.EphemeralDHCPv4 = lambda *a, **k: contextlib.nullcontext()  # the namespace is configured already
src = ds.DataSourceNWCS({"datasource": {"NWCS": {"retries": 1}}}, distro, paths)
report(src, src.get_data())
""", str(tmp_path))
    assert result["ok"] is True
    assert result["instance_id"] == "nwcs-ref" and result["hostname"] == "ref-nwcs"
    assert result["keys"] == [KEY] and result["userdata"] == USER_DATA and result["vendordata"] == VENDOR
    gateway = nwcs_cloud.guest_ip.rsplit(".", 1)[0] + ".1"
    assert result["network_config"] == {"version": 1, "config": [
        {"type": "physical", "name": "eth0", "mac_address": nwcs_cloud.mac,
         "subnets": [{"type": "static", "address": f"{nwcs_cloud.guest_ip}/24", "gateway": gateway,
                      "dns_nameservers": ["9.9.9.9", "149.112.112.112"]}]},
        # eth1 keeps its published name: 22.4 renames only NICs whose MAC the system has
        {"type": "physical", "name": "eth1", "mac_address": "52:54:00:aa:00:09", "subnets": [{"type": "dhcp"}]}]}
    # our agent's renaming of the same document (derived in process) gives 22.4's network config
    from cloudseed.agent.datasources.nwcs import network_config
    from cloudseed.provider.instance_data.nwcs import metadata
    from cloudseed.provider.registry import InstanceRecord

    doc = metadata(InstanceRecord.from_dict(fields))
    assert network_config(doc["network"], {nwcs_cloud.mac: "eth0"}) == result["network_config"]
