"""The AliYun datasource: detection from DMI, and a guest in a network namespace reading
``cloudseed serve``'s ECS emulation at 100.100.100.200, compared with cloud-init 22.4's
DataSourceAliYun reading the same service from the same guest; hostile and silent services.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.aliyun import AliYun, public_keys
from cloudseed.agent.state import Paths
from tests.agent.datasources.cloudlab import KEY, CloudLab, generators, provision
from tests.agent.datasources.cloudstack_support import RawServer
from tests.agent.datasources.netlab import find_in_guest, write_tree
from tests.reference import SYSTEM_PYTHON, _env, reference_tree

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-aliyun-user-data, content: seen}\n"
IID = "i-bp1aliyunlab0001"
DMI = {"sys_vendor": "Alibaba Cloud", "product_name": "Alibaba Cloud ECS"}
ECS = "100.100.100.200"


def context(target, cfg=None) -> DatasourceContext:
    return DatasourceContext(root=target, cfg=cfg or {}, cmdline="", paths=Paths(target), stage="network")


@pytest.mark.parametrize("facts,found", [
    ({"product_name": "Alibaba Cloud ECS"}, True),
    ({"product_name": "Alibaba Cloud ECS Bare Metal"}, False),  # 22.4 wants exactly this name
    ({"sys_vendor": "Alibaba Cloud"}, False),
    ({"sys_vendor": "Amazon EC2"}, False),
    ({}, False),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (AliYun.why(context(target)) is not None) == found
    if not found:
        assert find_datasource(context(target), ["AliYun"]).tried == []


def test_public_keys_in_every_shape_22_4_reads():
    assert public_keys({"0": {"openssh-key": "k0 "}, "1": {"openssh-key": ["k1", "k2"]}, "2": "k3",
                        "3": ["k4"], "4": 7, "5": {"other": "x"}}) == ["k0", "k1", "k2", "k3", "k4"]
    assert public_keys("not a tree") == [] and public_keys(None) == []


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    lab = CloudLab(str(tmp_path_factory.mktemp("ali")), IID, {"aliyun": {"region_id": "cn-hangzhou"}}, USER_DATA,
                   listen=[f"{ECS}:80"], service_addresses=(ECS,))
    yield lab
    lab.close()


def dmi_root(tmp_path) -> str:
    write_tree(tmp_path, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI.items()})
    return str(tmp_path)


REFERENCE = """
import json, sys
from cloudinit import distros, helpers
from cloudinit.sources import DataSourceAliYun as ds
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
distro = distros.fetch("debian")("debian", {}, paths)
ds._is_aliyun = lambda: True  # the DMI check: the guest namespace is no ECS instance
src = ds.DataSourceAliYun({"datasource": {"AliYun": {"max_wait": 10, "timeout": 5}}}, distro, paths)
ok = src.get_data()
print(json.dumps({"ok": ok, "instance_id": src.get_instance_id(), "hostname": src.get_hostname().hostname,
                  "keys": src.get_public_ssh_keys(), "userdata": src.userdata_raw.decode(),
                  "network_config": src.network_config, "region": src.region,
                  "availability_zone": src.availability_zone}))
"""


def test_reads_the_service_as_cloud_init_22_4_does(cloud, tmp_path):
    out = find_in_guest(cloud.lab, dmi_root(tmp_path), ["AliYun"])
    ds = out["ds"]
    assert ds is not None, out
    assert out["address"] == f"http://{ECS}"
    assert ds["metadata"]["instance-id"] == IID and ds["metadata"]["local-hostname"] == "lab-vm"
    assert ds["public_keys"] == [KEY] and ds["userdata_raw"] == USER_DATA
    if reference_tree() is None:
        pytest.skip("Debian's cloud-init could not be fetched")
    proc = subprocess.run(["ip", "netns", "exec", cloud.lab.guest, SYSTEM_PYTHON, "-c", textwrap.dedent(REFERENCE),
                           str(tmp_path / "ref")], env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert theirs["ok"] is True
    assert theirs["instance_id"] == ds["metadata"]["instance-id"]
    assert theirs["hostname"] == ds["metadata"]["local-hostname"]
    assert theirs["keys"] == ds["public_keys"] and theirs["userdata"] == ds["userdata_raw"]
    assert theirs["network_config"] == ds["network_config"]
    assert ds["network_config"]["ethernets"][cloud.lab.guest_if]["match"]["macaddress"] == cloud.mac
    # deliberate difference: 22.4 leaves region and zone empty on AliYun; cloudseed reads
    # region-id and zone-id
    assert theirs["region"] is None and theirs["availability_zone"] is None
    assert ds["region"] == "cn-hangzhou" and ds["availability_zone"] == "zone-a-1"


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "aliyun" and v1["platform"] == "aliyun"
        assert v1["instance_id"] == IID and v1["local_hostname"] == "lab-vm"
        assert v1["region"] == "cn-hangzhou" and v1["public_ssh_keys"] == [KEY]
        assert data["ds"]["meta-data"]["image-id"] and data["ds"]["_metadata_api_version"] == "2016-01-01"
        assert root.read("/etc/hostname").strip() == "lab-vm"
        assert KEY in root.read("/home/debian/.ssh/authorized_keys")
        assert root.read("/etc/from-aliyun-user-data") == "seen"
    finally:
        root.close()


def test_silent_service_is_a_bounded_wait(cloud, tmp_path):
    server = RawServer(cloud, 8087, None, host=ECS)
    try:
        out = find_in_guest(cloud.lab, dmi_root(tmp_path), ["AliYun"],
                            cfg={"datasource": {"AliYun": {"metadata_urls": [f"http://{ECS}:8087"], "max_wait": 2}}})
    finally:
        server.close()
    assert out["ds"] is None and out["took"] < 8, out
    assert "no metadata service answered" in out["_stderr"]


@pytest.mark.parametrize("reply,expected", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\na/\n", "deeper than"),  # an endless tree
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ntrunc", f"{ECS}:8088"),  # closes mid-reply
])
def test_hostile_service_is_a_clear_error(cloud, tmp_path, reply, expected):
    server = RawServer(cloud, 8088, reply, host=ECS)
    try:
        out = find_in_guest(cloud.lab, dmi_root(tmp_path), ["AliYun"],
                            cfg={"datasource": {"AliYun": {"metadata_urls": [f"http://{ECS}:8088"], "max_wait": 2,
                                                           "timeout": 2, "retries": 0}}})
    finally:
        server.close()
    assert out["ds"] is None and out["took"] < 15, out
    assert expected in " ".join(out["errors"]) + out["_stderr"], out


@pytest.mark.parametrize("facts,enabled", [({"product_name": "Alibaba Cloud ECS"}, True),
                                           ({"sys_vendor": "Alibaba Cloud"}, False)])
def test_generators_enable_the_agent_on_aliyun(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        assert ("AliYun (DMI" in verdict) == enabled, (kind, verdict)
