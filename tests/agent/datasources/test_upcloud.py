"""The UpCloud datasource: detection from DMI, cloud-init 22.4's network conversion as a
differential oracle, a boot against ``cloudseed serve``'s UpCloud emulation in a guest network
namespace, and hostile answers from a loopback server.
"""

from __future__ import annotations

import json
import os

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.upcloud import UpCloud, network_config
from cloudseed.agent.state import Paths
from tests.agent.datasources.cloudlab import KEY, CloudLab, generators, provision
from tests.agent.datasources.ds_search import search
from tests.agent.datasources.hostile_http import HostileServer
from tests.agent.datasources.netlab import write_tree
from tests.reference import reference_python

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-upcloud-user-data, content: seen}\n"
VENDOR = "#cloud-config\nusers: [default, {name: fromvendor}]\n"
UUID = "00133099-f1fd-4ed3-8d2c-8f8fb26a25f5"
DMI = {"sys_vendor": "UpCloud", "product_name": "Cloud Server", "product_uuid": UUID}
MACS = {"32:d5:ba:4a:36:e7": "eth0", "32:d5:ba:4a:84:cc": "eth1", "32:d5:ba:4a:63:e7": "eth2",
        "32:d5:ba:4a:8a:e1": "eth3"}


def _ip(address, family="IPv4", dhcp=True, dns=(), gateway="", network="", floating=False):
    return {"address": address, "dhcp": dhcp, "dns": list(dns), "family": family, "floating": floating,
            "gateway": gateway, "network": network}


NETWORK = {
    "interfaces": [
        {"index": 1, "mac": "32:d5:ba:4a:36:e7", "network_id": "n1", "type": "public", "ip_addresses": [
            _ip("94.237.105.53", dns=["94.237.127.9", "94.237.40.9"], gateway="94.237.104.1",
                network="94.237.104.0/22"),
            _ip("94.237.105.50", dhcp=False, network="94.237.105.50/32", floating=True)]},
        {"index": 2, "mac": "32:d5:ba:4a:84:cc", "network_id": "n2", "type": "utility", "ip_addresses": [
            _ip("10.6.3.27", dhcp=False, gateway="10.6.0.1", network="10.6.0.0/22", dns=["10.6.0.2"])]},
        {"index": 3, "mac": "32:d5:ba:4a:63:e7", "network_id": "n3", "type": "public", "ip_addresses": [
            _ip("2a04:3545:1000:720:38d6:baff:fe4a:63e7", "IPv6", dns=["2a04:3540:53::1"],
                gateway="2a04:3545:1000:720::1", network="2a04:3545:1000:720::/64"),
            _ip("2a04:3545:1000:720::99", "IPv6", dhcp=False, gateway="2a04:3545:1000:720::1",
                network="2a04:3545:1000:720::/64", dns=["94.237.127.9", "94.237.40.9"])]},
        {"index": 4, "mac": "32:d5:ba:4a:8a:e1", "network_id": "n4", "type": "private", "ip_addresses": [
            _ip("172.30.1.10", gateway="172.30.1.1", network="172.30.1.0/24")]},
    ],
    "dns": ["94.237.127.9", "94.237.40.9"],
}
DOC = {"cloud_name": "upcloud", "instance_id": UUID, "hostname": "uc-guest", "public_keys": [KEY],
       "region": "fi-hel2", "network": NETWORK, "user_data": USER_DATA, "vendor_data": VENDOR}


def context(target) -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage="network")


@pytest.mark.parametrize("facts,found", [
    ({"sys_vendor": "UpCloud", "product_uuid": UUID}, True),
    ({"product_name": "UpCloud"}, False),
    ({"sys_vendor": "upcloud"}, False),
    ({"sys_vendor": "DigitalOcean"}, False),
    ({}, False),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (UpCloud.why(context(target)) is not None) == found
    if not found:
        assert find_datasource(context(target), ["UpCloud"]).tried == []  # no request, no wait


def test_network_conversion_matches_cloud_init():
    code = ("import json, sys\nfrom unittest import mock\nfrom cloudinit.sources.helpers import upcloud\n"
            "with mock.patch('cloudinit.net.get_interfaces_by_mac', return_value=json.loads(sys.argv[2])):\n"
            "    print(json.dumps(upcloud.convert_network_config(json.loads(sys.argv[1]))))\n")
    theirs = json.loads(reference_python(code, json.dumps(NETWORK), json.dumps(MACS)).stdout)
    ours = network_config(NETWORK, MACS)
    assert ours == theirs
    assert ours["config"][1]["subnets"] == [{"type": "static", "control": "auto", "address": "10.6.3.27",
                                             "gateway": "10.6.0.1", "netmask": "22",
                                             "dns_nameservers": ["10.6.0.2"]}]


def test_a_mac_the_system_lacks_keeps_its_place():
    """Deliberate difference: cloud-init 22.4 raises for a MAC the system does not have (no network
    config at all); here the entry is kept, named ethN, and matched by its MAC."""
    config = network_config(NETWORK, {"32:d5:ba:4a:36:e7": "ens3"})
    assert [c.get("name") for c in config["config"]] == ["ens3", "eth1", "eth2", "eth3", None]


def test_a_missing_uuid_is_an_error(target):
    write_tree(target.top, {"sys/class/dmi/id/sys_vendor": "UpCloud\n"})
    found = find_datasource(context(target), ["UpCloud"])
    assert found.datasource is None and "gives no system UUID" in found.errors[0]


# ---------------------------------------------------------------------------------------- a boot


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    vendor = tmp_path_factory.mktemp("uc-vendor") / "vendor-data"
    vendor.write_text(VENDOR)
    lab = CloudLab(str(tmp_path_factory.mktemp("uc")), UUID, {"upcloud": {}}, USER_DATA,
                   extra=["--vendor-data", str(vendor)])
    yield lab
    lab.close()


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "upcloud" and v1["platform"] == "upcloud"
        assert v1["instance_id"] == UUID and v1["local_hostname"] == "lab-vm"
        # 22.4 has the zone only; here the region is the same name (as for DigitalOcean)
        assert v1["availability_zone"] == "zone-a-1" and v1["region"] == "zone-a-1"
        assert v1["public_ssh_keys"] == [KEY]
        assert root.read("/etc/hostname").strip() == "lab-vm"
        assert KEY in root.read("/home/debian/.ssh/authorized_keys")
        assert root.read("/etc/from-upcloud-user-data") == "seen"
        assert "\nfromvendor:" in root.read("/etc/passwd")
        rendered = "".join(root.read(f"/etc/systemd/network/{f}")
                           for f in sorted(os.listdir(os.path.join(root.top, "etc/systemd/network"))))
        assert cloud.mac in rendered and "DHCP=" in rendered and "94.237.127.9" in rendered
    finally:
        root.close()


@pytest.mark.parametrize("facts,enabled", [({"sys_vendor": "UpCloud", "product_uuid": UUID}, True),
                                           ({"sys_vendor": "QEMU"}, False)])
def test_generators_enable_the_agent_on_upcloud(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        assert ("UpCloud (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)


# ------------------------------------------------------------------------------ hostile answers


def test_reads_a_document_from_a_configured_url(target):
    with HostileServer(json.dumps(DOC).encode()) as srv:
        found, _ = search(target, "UpCloud", {"metadata_url": srv.base + "/metadata/v1.json"})
    ds = found.datasource
    assert ds is not None and ds.instance_id == UUID and ds.local_hostname == "uc-guest"
    assert ds.availability_zone == "fi-hel2" and ds.public_keys == [KEY]
    assert ds.userdata_raw == USER_DATA.encode() and ds.vendordata_raw == VENDOR.encode()
    assert ds.network_config["config"][-1] == {"type": "nameserver", "address": NETWORK["dns"]}


@pytest.mark.parametrize("body,message", [
    (b"<html>not json</html>", "not a JSON document"),
    (json.dumps(DOC).encode()[:70], "not a JSON document"),
    (b"\"a string\"", "expected a JSON object, got str"),
    (json.dumps({"hostname": "x"}).encode(), "no instance_id"),  # and no DMI UUID to fall back to
    (json.dumps({**DOC, "instance_id": ["x"]}).encode(), "no instance_id"),
])
def test_bad_documents_are_errors_naming_the_url(target, body, message):
    with HostileServer(body) as srv:
        url = srv.base + "/metadata/v1.json"
        found, _ = search(target, "UpCloud", {"metadata_url": url})
    assert found.datasource is None
    assert len(found.errors) == 1 and message in found.errors[0] and url in found.errors[0], found.errors


def test_hostile_fields_do_not_crash(target):
    doc = {**DOC, "network": {"interfaces": [{"mac": 7, "ip_addresses": "x"}, "junk"], "dns": None},
           "user_data": {"a": 1}, "public_keys": None}
    with HostileServer(json.dumps(doc).encode()) as srv:
        found, _ = search(target, "UpCloud", {"metadata_url": srv.base + "/metadata/v1.json"})
    ds = found.datasource
    assert ds is not None and ds.userdata_raw is None and ds.public_keys == []
    assert ds.network_config == {"version": 1, "config": [{"type": "physical", "name": "eth0", "mac_address": "7",
                                                           "subnets": []}]}


@pytest.mark.parametrize("mode,message", [("silent", "no complete answer"), ("cut", "closed after")])
def test_a_server_that_never_answers_or_cuts_is_bounded(target, mode, message):
    with HostileServer(json.dumps(DOC).encode(), mode) as srv:
        found, took = search(target, "UpCloud", {"metadata_url": srv.base + "/metadata/v1.json"})
    assert found.datasource is None and took < 8, took
    assert len(found.errors) == 1 and "UpCloud metadata" in found.errors[0] and srv.base in found.errors[0]
    assert message in found.errors[0], found.errors
