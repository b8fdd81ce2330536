"""The Oracle datasource: detection from DMI, the v1 fallback, cloud-init's VNIC network config,
and a boot against ``cloudseed serve``'s Oracle IMDS emulation in a guest network namespace.
"""

from __future__ import annotations

import os

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.oracle import Oracle, network_config
from cloudseed.agent.state import Paths
from tests.agent.datasources.cloudlab import KEY, CloudLab, generators, provision
from tests.agent.datasources.netlab import FIND_CODE, find_in_guest, write_tree

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-oracle-user-data, content: seen}\n"
IID = "ocid1.instance.oc1.phx.lab"
DMI = {"chassis_asset_tag": "OracleCloud.com", "sys_vendor": "QEMU"}
VNICS = [{"macAddr": "02:00:17:00:00:01", "privateIp": "10.0.0.2", "subnetCidrBlock": "10.0.0.0/24"},
         {"macAddr": "02:00:17:00:00:02", "privateIp": "10.0.1.7", "subnetCidrBlock": "10.0.1.0/26"},
         {"macAddr": "02:00:17:00:00:03", "privateIp": "10.0.2.7", "subnetCidrBlock": "10.0.2.0/24"}]


def context(target) -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage="network")


@pytest.mark.parametrize("facts,found", [
    ({"chassis_asset_tag": "OracleCloud.com"}, True),
    ({"chassis_asset_tag": "OpenStack Nova"}, False),
    ({"sys_vendor": "Hetzner"}, False),
    ({"product_name": "Google Compute Engine"}, False),
    ({}, False),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (Oracle.why(context(target)) is not None) == found
    if not found:
        assert find_datasource(context(target), ["Oracle"]).tried == []  # no request, no wait


def test_vnic_network_config_as_cloud_init_builds_it():
    system = {"02:00:17:00:00:01": "ens3", "02:00:17:00:00:02": "ens4"}  # the third is not attached
    assert network_config(VNICS, system) == {"version": 1, "config": [
        {"name": "ens3", "type": "physical", "mac_address": "02:00:17:00:00:01", "mtu": 9000,
         "subnets": [{"type": "dhcp"}]},
        {"name": "ens4", "type": "physical", "mac_address": "02:00:17:00:00:02", "mtu": 9000,
         "subnets": [{"type": "static", "address": "10.0.1.7/26"}]}]}


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    lab = CloudLab(str(tmp_path_factory.mktemp("oci")), IID, {"oracle": {"canonical_region": "us-phoenix-1"}},
                   USER_DATA)
    yield lab
    lab.close()


def test_v1_fallback(cloud, tmp_path):
    """A service whose v2 refuses (here: the bearer is not what it expects) is read over v1."""
    write_tree(tmp_path, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI.items()})
    out = find_in_guest(cloud.lab, str(tmp_path), ["Oracle"],
                        cfg={"datasource": {"Oracle": {"metadata_url": "http://169.254.169.254/opc"}}})
    assert out["ds"] is not None and out["imds"] == "v2", out["_stderr"][-2000:]
    code_v1 = ("import cloudseed.agent.datasources.oracle as o\n"
               "o.V2_HEADERS = {'Authorization': 'Bearer Wrong'}\n")
    code = code_v1 + FIND_CODE.replace("ROOT", repr(str(tmp_path))).replace("CFG", repr("{}")).replace(
        "STAGE", repr("network")).replace("CMDLINE", repr("")).replace("NAMES", repr(["Oracle"]))
    out = cloud.lab.guest_python(code)
    assert out["ds"] is not None and out["imds"] == "v1", out["_stderr"][-2000:]
    assert out["ds"]["metadata"]["instance-id"] == IID and "IMDS v2 unusable" in out["_stderr"]


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "oracle" and v1["platform"] == "oracle"
        assert v1["instance_id"] == IID and v1["local_hostname"] == "lab-vm"
        assert v1["region"] == "us-phoenix-1" and v1["availability_zone"] == "zone-a-1"
        assert v1["public_ssh_keys"] == [KEY]
        assert root.read("/etc/hostname").strip() == "lab-vm"
        assert KEY in root.read("/home/debian/.ssh/authorized_keys")
        assert root.read("/etc/from-oracle-user-data") == "seen"
        rendered = "".join(root.read(f"/etc/systemd/network/{f}")
                           for f in sorted(os.listdir(os.path.join(root.top, "etc/systemd/network"))))
        assert cloud.mac in rendered and "DHCP=ipv4" in rendered and "9000" in rendered
    finally:
        root.close()


@pytest.mark.parametrize("facts,enabled", [({"chassis_asset_tag": "OracleCloud.com"}, True),
                                           ({"chassis_asset_tag": "Default string"}, False)])
def test_generators_enable_the_agent_on_oracle(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        # (a seed device another test attached to this host may enable the agent: not for Oracle)
        assert ("Oracle (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)


FACTS = {"GCE": {"product_name": "Google Compute Engine", "bios_vendor": "Google"},
         "DigitalOcean": {"sys_vendor": "DigitalOcean", "product_serial": "31337"},
         "Hetzner": {"sys_vendor": "Hetzner", "product_serial": "4711"},
         "Oracle": {"chassis_asset_tag": "OracleCloud.com"},
         "plain KVM": {"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)"}}


@pytest.mark.parametrize("where", list(FACTS))
def test_each_cloud_is_detected_only_on_its_own_facts(target, where):
    """The four public clouds over each one's DMI facts: exactly the right one is possible, and
    where none is, none is tried (no request, so no wait)."""
    from cloudseed.agent.datasources import datasource_class

    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in FACTS[where].items()})
    names = ["GCE", "DigitalOcean", "Hetzner", "Oracle"]
    possible = [n for n in names if datasource_class(n).why(context(target)) is not None]
    assert possible == ([where] if where in names else [])
    if where not in names:
        assert find_datasource(context(target), names).tried == []
