"""The DigitalOcean datasource: detection from DMI, cloud-init's network conversion, and a boot
against ``cloudseed serve``'s DigitalOcean emulation in a guest network namespace.
"""

from __future__ import annotations

import json
import os

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.digitalocean import DigitalOcean, network_config
from cloudseed.agent.state import Paths
from tests.agent.datasources.cloudlab import KEY, CloudLab, generators, provision
from tests.agent.datasources.netlab import write_tree
from tests.reference import reference_python

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-do-user-data, content: seen}\n"
VENDOR = "#cloud-config\nusers: [default, {name: fromvendor}]\n"  # user-data's write_files would win
DMI = {"sys_vendor": "DigitalOcean", "product_name": "Droplet", "product_serial": "31337"}
INTERFACES = {
    "public": [{"mac": "04:01:58:27:7f:01", "type": "public",
                "ipv4": {"ip_address": "45.55.50.93", "netmask": "255.255.224.0", "gateway": "45.55.32.1"},
                "ipv6": {"ip_address": "2604:a880:800:10::1", "cidr": 64, "gateway": "2604:a880:800:10::1"},
                "anchor_ipv4": {"ip_address": "10.17.0.9", "netmask": "255.255.0.0", "gateway": "10.17.0.1"}}],
    "private": [{"mac": "04:01:58:27:7f:02", "type": "private",
                 "ipv4": {"ip_address": "10.132.75.35", "netmask": "255.255.0.0", "gateway": "10.132.0.1"}}],
}


def context(target) -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage="network")


@pytest.mark.parametrize("facts,found", [
    ({"sys_vendor": "DigitalOcean"}, True),
    ({"sys_vendor": "Hetzner"}, False),
    ({"product_name": "Google Compute Engine"}, False),
    ({"chassis_asset_tag": "OracleCloud.com"}, False),
    ({}, False),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (DigitalOcean.why(context(target)) is not None) == found
    if not found:
        assert find_datasource(context(target), ["DigitalOcean"]).tried == []  # no request, no wait


def test_network_conversion_matches_cloud_init():
    ours = network_config(INTERFACES, ["1.1.1.1"], {})
    code = ("import json, sys\nfrom unittest import mock\nfrom cloudinit.sources.helpers import digitalocean as d\n"
            "macs = {'04:01:58:27:7f:01': 'ens3', '04:01:58:27:7f:02': 'ens4'}\n"
            "with mock.patch('cloudinit.net.get_interfaces_by_mac', return_value=macs):\n"
            "    print(json.dumps(d.convert_network_configuration(json.loads(sys.argv[1]), ['1.1.1.1'])))\n")
    theirs = json.loads(reference_python(code, json.dumps(INTERFACES)).stdout)
    assert ours == theirs


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    lab = CloudLab(str(tmp_path_factory.mktemp("do")), "do-lab", {"digitalocean": {"droplet_id": 31337,
                                                                                  "region": "fra1"}},
                   USER_DATA, extra=["--vendor-data", _vendor_file(tmp_path_factory)])
    yield lab
    lab.close()


def _vendor_file(factory) -> str:
    path = factory.mktemp("do-vendor") / "vendor-data"
    path.write_text(VENDOR)
    return str(path)


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "digitalocean" and v1["platform"] == "digitalocean"
        assert v1["instance_id"] == "31337" and v1["local_hostname"] == "lab-vm"
        assert v1["region"] == "fra1" and v1["availability_zone"] == "fra1" and v1["public_ssh_keys"] == [KEY]
        assert root.read("/etc/hostname").strip() == "lab-vm"
        assert KEY in root.read("/home/debian/.ssh/authorized_keys")
        assert root.read("/etc/from-do-user-data") == "seen"
        assert "\nfromvendor:" in root.read("/etc/passwd")
        rendered = "".join(root.read(f"/etc/systemd/network/{f}")
                           for f in sorted(os.listdir(os.path.join(root.top, "etc/systemd/network"))))
        assert cloud.mac in rendered and f"{cloud.lab.guest_ip}/24" in rendered
    finally:
        root.close()


@pytest.mark.parametrize("facts,enabled", [({"sys_vendor": "DigitalOcean"}, True), ({"sys_vendor": "QEMU"}, False)])
def test_generators_enable_the_agent_on_digitalocean(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        # (a seed device another test attached to this host may enable the agent: not for DigitalOcean)
        assert ("DigitalOcean (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)
