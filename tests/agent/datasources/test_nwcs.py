"""The NWCS datasource: detection from DMI, cloud-init 22.4's renaming of the published network
config as a differential oracle, a boot against ``cloudseed serve``'s NWCS emulation in a guest
network namespace, and hostile answers from a loopback server.
"""

from __future__ import annotations

import json
import os

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.nwcs import NWCS, network_config
from cloudseed.agent.state import Paths
from tests.agent.datasources.cloudlab import KEY, CloudLab, generators, provision
from tests.agent.datasources.ds_search import search
from tests.agent.datasources.hostile_http import HostileServer
from tests.agent.datasources.netlab import write_tree
from tests.reference import reference_python

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-nwcs-user-data, content: seen}\n"
VENDOR = "#cloud-config\nusers: [default, {name: fromvendor}]\n"
IID = "nwcs-lab-1"
DMI = {"sys_vendor": "NWCS", "product_name": "NWCS VPS"}
MACS = {"52:54:00:aa:00:01": "ens3", "52:54:00:aa:00:02": "ens4"}
NETWORK = {"version": 1, "config": [
    {"type": "physical", "name": "eth0", "mac_address": "52:54:00:aa:00:01",
     "subnets": [{"type": "static", "address": "192.0.2.10/24", "gateway": "192.0.2.1",
                  "dns_nameservers": ["9.9.9.9"]}, {"type": "static", "address": "2001:db8::10/64"}]},
    {"type": "physical", "name": "eth1", "mac_address": "52:54:00:aa:00:02", "subnets": [{"type": "dhcp"}]},
    {"type": "physical", "name": "eth2", "mac_address": "52:54:00:aa:00:03", "subnets": [{"type": "dhcp"}]},
]}
DOC = {"instance-id": IID, "hostname": "nwcs-guest", "public-keys": [KEY], "network": NETWORK,
       "userdata": USER_DATA, "vendordata": VENDOR}


def context(target) -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage="network")


@pytest.mark.parametrize("facts,found", [
    ({"sys_vendor": "NWCS"}, True),
    ({"sys_vendor": "nwcs"}, False),
    ({"sys_vendor": "NWCS Inc"}, False),
    ({"product_name": "NWCS"}, False),
    ({}, False),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (NWCS.why(context(target)) is not None) == found
    if not found:
        assert find_datasource(context(target), ["NWCS"]).tried == []  # no request, no wait


REFERENCE_RENAMING = """
import json, sys
from unittest import mock
from cloudinit import distros, helpers
from cloudinit.sources import DataSourceNWCS as ds
paths = helpers.Paths({"cloud_dir": sys.argv[3] + "/cloud", "run_dir": sys.argv[3] + "/run"})
src = ds.DataSourceNWCS({}, distros.fetch("debian")("debian", {}, paths), paths)
src.metadata = {"network": json.loads(sys.argv[1])}
macs = json.loads(sys.argv[2])
with mock.patch.object(ds, "get_interface_name", lambda mac: macs.get(mac)):
    print(json.dumps(src.network_config))
"""


def test_network_renaming_matches_cloud_init(tmp_path):
    theirs = json.loads(reference_python(REFERENCE_RENAMING, json.dumps(NETWORK), json.dumps(MACS),
                                         str(tmp_path)).stdout)
    ours = network_config(json.loads(json.dumps(NETWORK)), MACS)
    assert ours == theirs
    assert [c["name"] for c in ours["config"]] == ["ens3", "ens4", "eth2"]  # a MAC not here keeps its name


def test_a_nameserver_entry_is_kept():
    """Deliberate difference: cloud-init 22.4 fails (KeyError 'mac_address') on any entry that is no
    NIC, such as a version 1 ``nameserver`` entry; here it is kept as it is."""
    network = {"version": 1, "config": [*NETWORK["config"], {"type": "nameserver", "address": ["1.1.1.1"]}]}
    config = network_config(network, MACS)
    assert config["config"][-1] == {"type": "nameserver", "address": ["1.1.1.1"]}
    assert network_config({"version": 1, "config": []}, MACS) is None


# ---------------------------------------------------------------------------------------- a boot


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    vendor = tmp_path_factory.mktemp("nwcs-vendor") / "vendor-data"
    vendor.write_text(VENDOR)
    lab = CloudLab(str(tmp_path_factory.mktemp("nwcs")), IID, {"nwcs": {"nameservers": ["9.9.9.10"]}}, USER_DATA,
                   extra=["--vendor-data", str(vendor)])
    yield lab
    lab.close()


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "nwcs" and v1["platform"] == "nwcs"
        assert v1["instance_id"] == IID and v1["local_hostname"] == "lab-vm"
        assert v1["region"] is None and v1["availability_zone"] is None  # NWCS names neither
        assert v1["public_ssh_keys"] == [KEY]
        assert root.read("/etc/hostname").strip() == "lab-vm"
        assert KEY in root.read("/home/debian/.ssh/authorized_keys")
        assert root.read("/etc/from-nwcs-user-data") == "seen"
        assert "\nfromvendor:" in root.read("/etc/passwd")
        rendered = "".join(root.read(f"/etc/systemd/network/{f}")
                           for f in sorted(os.listdir(os.path.join(root.top, "etc/systemd/network"))))
        assert cloud.mac in rendered and f"{cloud.lab.guest_ip}/24" in rendered and "9.9.9.10" in rendered
    finally:
        root.close()


@pytest.mark.parametrize("facts,enabled", [({"sys_vendor": "NWCS"}, True), ({"sys_vendor": "QEMU"}, False)])
def test_generators_enable_the_agent_on_nwcs(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        assert ("NWCS (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)


# ------------------------------------------------------------------------------ hostile answers


def test_reads_a_document_from_a_configured_url(target):
    with HostileServer(json.dumps(DOC).encode()) as srv:
        found, _ = search(target, "NWCS", {"metadata_url": srv.base + "/api/v1/metadata"})
    ds = found.datasource
    assert ds is not None and ds.instance_id == IID and ds.local_hostname == "nwcs-guest"
    assert ds.public_keys == [KEY] and ds.region is None
    assert ds.userdata_raw == USER_DATA.encode() and ds.vendordata_raw == VENDOR.encode()
    assert ds.network_config["config"][0]["mac_address"] == "52:54:00:aa:00:01"


@pytest.mark.parametrize("body,message", [
    (b"<html>not json</html>", "not a JSON document"),
    (json.dumps(DOC).encode()[:50], "not a JSON document"),
    (b"null", "expected a JSON object, got NoneType"),
    (json.dumps({"hostname": "x"}).encode(), "no instance-id"),
    (json.dumps({**DOC, "instance-id": True}).encode(), "no instance-id"),
])
def test_bad_documents_are_errors_naming_the_url(target, body, message):
    with HostileServer(body) as srv:
        url = srv.base + "/api/v1/metadata"
        found, _ = search(target, "NWCS", {"metadata_url": url})
    assert found.datasource is None
    assert len(found.errors) == 1 and message in found.errors[0] and url in found.errors[0], found.errors


def test_hostile_fields_do_not_crash(target):
    doc = {**DOC, "network": {"version": 1, "config": ["junk", {"mac_address": 5}]}, "userdata": 12,
           "public-keys": "ssh-ed25519 AAAA one"}
    with HostileServer(json.dumps(doc).encode()) as srv:
        found, _ = search(target, "NWCS", {"metadata_url": srv.base + "/api/v1/metadata"})
    ds = found.datasource
    assert ds is not None and ds.userdata_raw is None and ds.public_keys == ["ssh-ed25519 AAAA one"]
    assert ds.network_config == {"version": 1, "config": [{"mac_address": 5}]}  # "junk" left out


@pytest.mark.parametrize("mode,message", [("silent", "no complete answer"), ("cut", "closed after")])
def test_a_server_that_never_answers_or_cuts_is_bounded(target, mode, message):
    with HostileServer(json.dumps(DOC).encode(), mode) as srv:
        found, took = search(target, "NWCS", {"metadata_url": srv.base + "/api/v1/metadata"})
    assert found.datasource is None and took < 8, took
    assert len(found.errors) == 1 and "NWCS metadata" in found.errors[0] and srv.base in found.errors[0]
    assert message in found.errors[0], found.errors
