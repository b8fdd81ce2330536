"""The CloudCIX datasource: detection from DMI, a boot against ``cloudseed serve``'s CloudCIX
emulation in a guest network namespace (identity, keys, user-data, its netplan v2 network
config rendered), and hostile services: a silent one, truncated or malformed documents.

No reference differential: DataSourceCloudCIX is not in Debian's cloud-init 22.4 (added in
24.x); the emulation and the datasource follow that datasource and its documented example.
"""

from __future__ import annotations

import os

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.cloudcix import CloudCIX
from cloudseed.agent.state import Paths
from tests.agent.datasources.cloudlab import KEY, CloudLab, generators, provision
from tests.agent.datasources.netlab import find_against_script, write_tree

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-cloudcix-user-data, content: seen}\n"
IID = "12_34"
DMI = {"product_name": "CloudCIX"}
QUICK = {"datasource": {"CloudCIX": {"max_wait": 1, "timeout": 1, "retries": 0}}}


def context(target) -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage="network")


@pytest.mark.parametrize("facts,found", [
    ({"product_name": "CloudCIX"}, True),
    ({"product_name": "CloudCIX VM"}, False),
    ({"sys_vendor": "CloudCIX"}, False),
    ({}, False),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (CloudCIX.why(context(target)) is not None) == found
    if not found:
        assert find_datasource(context(target), ["CloudCIX"]).tried == []  # no request, no wait


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    lab = CloudLab(str(tmp_path_factory.mktemp("cix")), IID, {"cloudcix": {"search": ["cloudcix.com"]}}, USER_DATA)
    yield lab
    lab.close()


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "cloudcix" and v1["platform"] == "cloudcix"
        assert v1["instance_id"] == IID and v1["local_hostname"] == "lab-vm"
        assert v1["public_ssh_keys"] == [KEY]
        assert root.read("/etc/hostname").strip() == "lab-vm"
        assert KEY in root.read("/home/debian/.ssh/authorized_keys")
        assert root.read("/etc/from-cloudcix-user-data") == "seen"
        rendered = "".join(root.read(f"/etc/systemd/network/{f}")
                           for f in sorted(os.listdir(os.path.join(root.top, "etc/systemd/network"))))
        assert cloud.mac in rendered and f"Address={cloud.lab.guest_ip}/24" in rendered
        assert f"Gateway={cloud.lab.cloud_ip}" in rendered and "Domains=cloudcix.com" in rendered
        assert data["ds"]["network"]["version"] == 2
    finally:
        root.close()


@pytest.mark.parametrize("facts,enabled", [({"product_name": "CloudCIX"}, True), ({"product_name": "QEMU"}, False)])
def test_generators_enable_the_agent_on_cloudcix(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        assert ("CloudCIX (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)


@pytest.mark.parametrize("script,expect", [
    ({"/v1/metadata": {"action": "silent"}}, None),
    ({"/v1/metadata": {"action": "close"}}, None),
    ({"/v1/metadata": {"body": "{\"instance_id\": \"x\", \"netw"}}, "not JSON"),
    ({"/v1/metadata": {"body": "{\"network\": {}}"}}, "no instance_id"),
    ({"/v1/metadata": {"body": "{\"instance_id\": \"x\", \"network\": {\"version\": 7}}"}}, "version 1 or 2"),
    ({"/v1/metadata": {"body": "{\"instance_id\": \"x\"}"}, "/v1/userdata": {"action": "silent"}}, "userdata"),
], ids=["silent", "closed-mid-reply", "truncated-json", "no-id", "bad-network", "userdata-silent"])
def test_hostile_services_fail_clearly_and_quickly(tmp_path, script, expect):
    facts = {"sys/class/dmi/id/product_name": "CloudCIX\n"}
    out, took = find_against_script(str(tmp_path), script, facts, ["CloudCIX"], QUICK)
    assert took < 20
    assert out["ds"] is None
    if expect is None:
        assert out["took"] < 6
    else:
        assert expect in " ".join(out["errors"]), out["errors"]
