"""The Hetzner datasource: detection from DMI, the serial check, and a boot against
``cloudseed serve``'s Hetzner emulation in a guest network namespace.
"""

from __future__ import annotations

import os

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.hetzner import Hetzner
from cloudseed.agent.state import Paths
from tests.agent.datasources.cloudlab import KEY, CloudLab, generators, provision
from tests.agent.datasources.netlab import find_in_guest, write_tree

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-hetzner-user-data, content: seen}\n"
IID = "4711"
DMI = {"sys_vendor": "Hetzner", "product_name": "vServer", "product_serial": IID}


def context(target) -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage="network")


@pytest.mark.parametrize("facts,found", [
    ({"sys_vendor": "Hetzner"}, True),
    ({"sys_vendor": "DigitalOcean"}, False),
    ({"product_name": "Google"}, False),
    ({"sys_vendor": "QEMU", "product_name": "Standard PC"}, False),
    ({}, False),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (Hetzner.why(context(target)) is not None) == found
    if not found:
        assert find_datasource(context(target), ["Hetzner"]).tried == []  # no request, no wait


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    lab = CloudLab(str(tmp_path_factory.mktemp("hz")), IID, {"hetzner": {"region": "eu-central"}}, USER_DATA)
    yield lab
    lab.close()


def test_serial_must_match_the_instance(cloud, tmp_path):
    write_tree(tmp_path, {"sys/class/dmi/id/sys_vendor": "Hetzner\n", "sys/class/dmi/id/product_serial": "999\n"})
    out = find_in_guest(cloud.lab, str(tmp_path), ["Hetzner"])
    assert out["ds"] is None and "does not match instance-id '4711'" in " ".join(out["errors"])


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "hetzner" and v1["platform"] == "hetzner"
        assert v1["instance_id"] == IID and v1["local_hostname"] == "lab-vm"
        assert v1["region"] == "eu-central" and v1["availability_zone"] == "zone-a-1"
        assert v1["public_ssh_keys"] == [KEY]
        assert root.read("/etc/hostname").strip() == "lab-vm"
        assert KEY in root.read("/home/debian/.ssh/authorized_keys")
        assert root.read("/etc/from-hetzner-user-data") == "seen"
        rendered = "".join(root.read(f"/etc/systemd/network/{f}")
                           for f in sorted(os.listdir(os.path.join(root.top, "etc/systemd/network"))))
        assert cloud.mac in rendered and "DHCP=ipv4" in rendered
    finally:
        root.close()


@pytest.mark.parametrize("facts,enabled", [({"sys_vendor": "Hetzner"}, True), ({"sys_vendor": "QEMU"}, False)])
def test_generators_enable_the_agent_on_hetzner(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        # (a seed device another test attached to this host may enable the agent: not for Hetzner)
        assert ("Hetzner (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)
