"""The Vultr datasource: detection from DMI and the kernel command line, cloud-init 22.4's network
conversion as a differential oracle, a boot against ``cloudseed serve``'s Vultr emulation in a guest
network namespace, and hostile answers from a loopback server (not JSON, truncated, a server that
never answers, one that closes mid-reply). ``HostileServer`` is shared with the UpCloud and NWCS tests.
"""

from __future__ import annotations

import json
import os

import pytest

from cloudseed.agent.datasources import find_datasource
from cloudseed.agent.datasources.vultr import Vultr, network_config, vendordata
from tests.agent.datasources.cloudlab import KEY, CloudLab, generators, provision
from tests.agent.datasources.ds_search import context, search
from tests.agent.datasources.hostile_http import HostileServer
from tests.agent.datasources.netlab import write_tree
from tests.reference import reference_python

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-vultr-user-data, content: seen}\n"
VENDOR = "#cloud-config\nusers: [default, {name: fromvendor}]\n"
IID = "29bea708-2e6e-480a-90ad-0e6b5d5ad62f"
DMI = {"sys_vendor": "Vultr", "product_name": "VC2", "product_serial": IID}
MACS = {"56:00:03:1b:4e:ca": "enp1s0", "5a:00:03:1b:4e:ca": "enp6s0", "5a:00:03:1b:4e:cb": "enp7s0"}
DOC = {
    "hostname": "vultr-guest", "instance-v2-id": IID, "instanceid": "42",
    "region": {"regioncode": "EWR", "countrycode": "US"},
    "public-keys": [KEY], "user-data": USER_DATA, "vendor-data": [VENDOR],
    "interfaces": [
        {"ipv4": {"additional": [{"address": "45.76.8.10", "netmask": "255.255.255.0",
                                  "routes": [{"netmask": 24, "gateway": "45.76.8.1", "network": "45.76.9.0"}]}],
                  "address": "45.76.7.171", "gateway": "45.76.6.1", "netmask": "255.255.254.0"},
         "ipv6": {"additional": [{"network": "2002:19f0:5:28a7::", "prefix": "64"}],
                  "address": "2001:19f0:5:28a7:5400:03ff:fe1b:4eca", "network": "2001:19f0:5:28a7::",
                  "prefix": "64"},
         "mac": "56:00:03:1b:4e:ca", "network-type": "public"},
        {"ipv4": {"additional": [], "address": "10.1.112.3", "gateway": "", "netmask": "255.255.240.0"},
         "ipv6": {"additional": [], "network": "", "prefix": ""}, "mac": "5a:00:03:1b:4e:ca", "mtu": 1450,
         "routes": [{"netmask": 16, "gateway": "10.1.112.1", "network": "10.2.0.0"}],
         "network-type": "private", "networkid": "net5e7155329d730"},
        {"ipv4": {"additional": [], "address": "", "gateway": "", "netmask": ""},
         "ipv6": {"additional": [], "network": "", "prefix": ""}, "mac": "5a:00:03:1b:4e:cb",
         "network-type": "private", "unconfigured": True},
    ],
}


@pytest.mark.parametrize("facts,cmdline,found", [
    ({"sys_vendor": "Vultr"}, "", True),
    ({}, "root=/dev/vda1 vultr quiet", True),  # bare metal
    ({}, "root=/dev/vda1 vultr.x=1 novultr", False),
    ({"sys_vendor": "Vultr Holdings"}, "", False),
    ({"sys_vendor": "DigitalOcean"}, "", False),
    ({}, "", False),
])
def test_detection_from_dmi_and_the_kernel_command_line(target, facts, cmdline, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (Vultr.why(context(target, cmdline=cmdline)) is not None) == found
    if not found:
        assert find_datasource(context(target, cmdline=cmdline), ["Vultr"]).tried == []  # no request, no wait


REFERENCE_CONVERSION = """
import json, sys
from unittest import mock
from cloudinit.sources.helpers import vultr
doc, macs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
with mock.patch("cloudinit.net.get_interfaces_by_mac", return_value=macs):
    if "cloud_interfaces" in doc:
        print(json.dumps(vultr.add_interface_names(doc["cloud_interfaces"])))
    else:
        print(json.dumps(vultr.generate_network_config(doc["interfaces"])))
"""


def test_network_conversion_matches_cloud_init():
    ours = network_config(json.loads(json.dumps(DOC)), MACS)
    theirs = json.loads(reference_python(REFERENCE_CONVERSION, json.dumps(DOC), json.dumps(MACS)).stdout)
    assert ours == theirs
    names = [c.get("name") for c in ours["config"]]
    assert names == [None, "enp1s0", "enp6s0"]  # the unconfigured private NIC is left out


def test_cloud_interfaces_are_named_as_cloud_init_names_them():
    doc = {"cloud_interfaces": [{"type": "physical", "mac": "56:00:03:1b:4e:ca",
                                 "subnets": [{"type": "dhcp"}]}]}
    theirs = json.loads(reference_python(REFERENCE_CONVERSION, json.dumps(doc), json.dumps(MACS)).stdout)
    ours = network_config(doc, MACS)
    assert ours["config"] == theirs and theirs[0]["name"] == "enp1s0"


def test_a_mac_the_system_lacks_keeps_its_place():
    """Deliberate difference: cloud-init 22.4 raises (and the whole datasource fails) for a MAC the
    system does not have; here the entry is kept, named ethN, and matched by its MAC."""
    config = network_config(json.loads(json.dumps(DOC)), {})
    assert [(c.get("name"), c.get("mac_address")) for c in config["config"][1:]] == [
        ("eth0", "56:00:03:1b:4e:ca"), ("eth1", "5a:00:03:1b:4e:ca")]


def test_vendor_data_lists():
    assert vendordata([VENDOR]) == VENDOR.encode()
    assert vendordata([]) is None and vendordata(None) is None and vendordata("") is None
    two = vendordata([VENDOR, {"packages": ["htop"]}])
    assert two.startswith(b"#cloud-config-archive\n")
    assert json.loads(two.split(b"\n", 1)[1]) == [VENDOR, '#cloud-config\n{"packages": ["htop"]}']


# ---------------------------------------------------------------------------------------- a boot


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    vendor = tmp_path_factory.mktemp("vultr-vendor") / "vendor-data"
    vendor.write_text(VENDOR)
    clouds = {"vultr": {"region": "ams", "startup_script": "#!/bin/sh\necho s3cret\n"}}
    lab = CloudLab(str(tmp_path_factory.mktemp("vultr")), IID, clouds, USER_DATA,
                   extra=["--vendor-data", str(vendor)])
    yield lab
    lab.close()


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "vultr" and v1["platform"] == "vultr"
        assert v1["instance_id"] == IID and v1["local_hostname"] == "lab-vm"
        assert v1["region"] == "ams" and v1["availability_zone"] is None  # Vultr names no zone
        assert v1["public_ssh_keys"] == [KEY]
        # the startup script is root's only (instance-data-sensitive.json), not in world-readable data
        assert "ds/meta_data/startup-script" in data["sensitive_keys"] and "s3cret" not in json.dumps(data)
        assert "s3cret" in root.read("/run/cloudseed/instance-data-sensitive.json")
        assert root.read("/etc/hostname").strip() == "lab-vm"
        assert KEY in root.read("/home/debian/.ssh/authorized_keys")
        assert root.read("/etc/from-vultr-user-data") == "seen"
        assert "\nfromvendor:" in root.read("/etc/passwd")
        rendered = "".join(root.read(f"/etc/systemd/network/{f}")
                           for f in sorted(os.listdir(os.path.join(root.top, "etc/systemd/network"))))
        assert cloud.mac in rendered and "DHCP=" in rendered and "108.61.10.10" in rendered
    finally:
        root.close()


@pytest.mark.parametrize("facts,enabled", [({"sys_vendor": "Vultr"}, True), ({"sys_vendor": "QEMU"}, False)])
def test_generators_enable_the_agent_on_vultr(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        # (a seed device another test attached to this host may enable the agent: not for Vultr)
        assert ("Vultr (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)


# ------------------------------------------------------------------------------ hostile answers


def test_reads_a_document_from_a_configured_url(target):
    with HostileServer(json.dumps(DOC).encode()) as srv:
        found, _ = search(target, "Vultr", {"url": srv.base})
    ds = found.datasource
    assert ds is not None and ds.instance_id == IID and ds.local_hostname == "vultr-guest"
    assert ds.region == "us"  # as 22.4: the country code, lower case, wins over the region code
    assert ds.userdata_raw == USER_DATA.encode() and ds.vendordata_raw == VENDOR.encode()
    assert ds.public_keys == [KEY] and ds.subplatform == f"metadata ({srv.base}/v1.json)"


@pytest.mark.parametrize("body,message", [
    (b"<html>not json</html>", "not a JSON document"),
    (json.dumps(DOC).encode()[:60], "not a JSON document"),
    (b"[1, 2]", "expected a JSON object, got list"),
    (json.dumps({**DOC, "instance-v2-id": None, "instanceid": None}).encode(), "no instance-v2-id"),
    (json.dumps({**DOC, "instance-v2-id": {"x": 1}}).encode(), "no instance-v2-id"),
])
def test_bad_documents_are_errors_naming_the_url(target, body, message):
    with HostileServer(body) as srv:
        found, _ = search(target, "Vultr", {"url": srv.base})
    assert found.datasource is None
    assert len(found.errors) == 1 and message in found.errors[0] and f"{srv.base}/v1.json" in found.errors[0]


def test_hostile_fields_do_not_crash(target):
    doc = {**DOC, "region": "ewr", "public-keys": "ssh-ed25519 AAAA one", "user-data": ["x"],
           "vendor-data": 7, "interfaces": [{"mac": "56:00:03:1b:4e:ca", "ipv4": "x"}, "junk"]}
    with HostileServer(json.dumps(doc).encode()) as srv:
        found, _ = search(target, "Vultr", {"url": srv.base})
    ds = found.datasource
    assert ds is not None and ds.region is None and ds.public_keys == ["ssh-ed25519 AAAA one"]
    assert ds.userdata_raw is None and ds.vendordata_raw is None
    assert [c["type"] for c in ds.network_config["config"]] == ["nameserver", "physical"]


@pytest.mark.parametrize("mode,message", [("silent", "no complete answer"), ("cut", "closed after")])
def test_a_server_that_never_answers_or_cuts_is_bounded(target, mode, message):
    with HostileServer(json.dumps(DOC).encode(), mode) as srv:
        found, took = search(target, "Vultr", {"url": srv.base})
    assert found.datasource is None and took < 8, took
    assert len(found.errors) == 1 and "Vultr metadata" in found.errors[0] and srv.base in found.errors[0]
    assert message in found.errors[0], found.errors
