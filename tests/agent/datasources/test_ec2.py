"""EC2 IMDS over HTTP in network namespaces: IMDSv2 tokens, v1 fallback, IPv6 endpoint, per-MAC network."""

from __future__ import annotations

import json
import os

import pytest

from tests.agent.datasources.netlab import PYTHON, REPO, NetLab, find_in_guest, write_tree

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

MAC0, MAC1 = "0a:11:22:33:44:55", "0a:11:22:33:44:66"
V = "2021-03-23"
KEY = "ssh-ed25519 AAAAec2Key ec2@example"


def ec2_tree(top):
    md = f"{V}/meta-data"
    nic0, nic1 = f"{md}/network/interfaces/macs/{MAC0}", f"{md}/network/interfaces/macs/{MAC1}"
    write_tree(top, {
        ".listing": "1.0\n2009-04-04\n2016-09-02\n2021-03-23\nlatest\n",
        f"{md}/instance-id": "i-0123456789abcdef0",
        f"{md}/local-hostname": "ip-10-0-0-5.ec2.internal",
        f"{md}/instance-type": "t3.micro",
        f"{md}/placement/availability-zone": "eu-west-1b",
        f"{md}/public-keys/.listing": "0=my-key",
        f"{md}/public-keys/0/openssh-key": KEY + "\n",
        f"{md}/iam/info": '{"Code": "Success", "InstanceProfileArn": "arn:x"}',
        f"{md}/iam/security-credentials/role": "SECRET",
        f"{nic0}/device-number": "0",
        f"{nic0}/local-ipv4s": "10.0.0.5\n10.0.0.6",
        f"{nic0}/subnet-ipv4-cidr-block": "10.0.0.0/20",
        f"{nic0}/ipv6s": "2001:db8::5",
        f"{nic1}/device-number": "1",
        f"{nic1}/local-ipv4s": "10.0.1.7",
        f"{V}/user-data": "#cloud-config\nhostname: from-ec2\n",
        f"{V}/dynamic/instance-identity/document": json.dumps(
            {"region": "eu-west-1", "availabilityZone": "eu-west-1b", "instanceId": "i-0123456789abcdef0"}),
    })


@pytest.fixture
def lab(tmp_path):
    lab = NetLab()
    root = tmp_path / "root"
    write_tree(root, {"sys/class/dmi/id/sys_vendor": "Amazon EC2\n",
                      "sys/class/dmi/id/product_uuid": "ec2e1916-9099-7caf-fd21-012345abcdef\n"})
    lab.root = str(root)
    lab.tree = tmp_path / "tree"
    lab.log = tmp_path / "requests.log"
    ec2_tree(lab.tree)
    yield lab
    lab.close()


def serve(lab, *extra, listen=("169.254.169.254:80",)):
    args = [PYTHON, os.path.join(REPO, "tests/agent/datasources/mdserver.py"), "--tree", str(lab.tree),
            "--log", str(lab.log), *extra]
    for spec in listen:
        args += ["--listen", spec]
    lab.start_in_cloud(*args, ready="ready")


def requests(lab):
    return [json.loads(line) for line in lab.log.read_text().splitlines()] if lab.log.exists() else []


def test_imdsv2_crawl(lab):
    serve(lab, "--imdsv2", "on")
    out = find_in_guest(lab, lab.root, ["Ec2"])
    ds = out["ds"]
    assert ds is not None, out["_stderr"]
    assert out["imds"] == "v2"
    assert ds["metadata"]["instance-id"] == "i-0123456789abcdef0"
    assert ds["metadata"]["local-hostname"] == "ip-10-0-0-5.ec2.internal"
    assert ds["public_keys"] == [KEY]
    assert ds["availability_zone"] == "eu-west-1b" and ds["region"] == "eu-west-1"
    assert ds["userdata_raw"] == "#cloud-config\nhostname: from-ec2\n"
    assert ds["raw"]["meta-data"]["iam"]["info"]["Code"] == "Success"
    assert "security-credentials" not in ds["raw"]["meta-data"]["iam"]
    net = ds["network_config"]
    assert net["version"] == 2
    eth0, eth1 = net["ethernets"]["eth0"], net["ethernets"]["eth1"]
    assert eth0["match"] == {"macaddress": MAC0} and eth0["dhcp4"] and eth0["dhcp6"]
    assert eth0["addresses"] == ["10.0.0.6/20"]
    assert eth0["dhcp4-overrides"] == {"route-metric": 100} and eth1["dhcp4-overrides"] == {"route-metric": 200}
    assert not eth1["dhcp6"] and "addresses" not in eth1
    reqs = requests(lab)
    assert reqs[0]["method"] == "PUT" and reqs[0]["path"] == "/latest/api/token" and reqs[0]["ttl"] == "21600"
    assert all(r["token"] and r["status"] == 200 for r in reqs[1:] if r["method"] == "GET" and
               not r["path"].endswith("/iam/security-credentials/role"))
    assert not any("security-credentials" in r["path"] for r in reqs)
    assert all(f"/{V}/" in r["path"] or r["path"] in ("/", "/latest/api/token") for r in reqs)


def test_expired_token_is_renewed(lab):
    serve(lab, "--imdsv2", "on", "--token-uses", "4")
    out = find_in_guest(lab, lab.root, ["Ec2"])
    assert out["ds"] is not None, out["_stderr"]
    reqs = requests(lab)
    puts = [r for r in reqs if r["method"] == "PUT"]
    assert len(puts) >= 3
    assert any(r["status"] == 401 for r in reqs)
    assert "token refused" in out["_stderr"]
    assert out["ds"]["public_keys"] == [KEY]


def test_imdsv1_when_v2_is_not_offered(lab):
    serve(lab)
    out = find_in_guest(lab, lab.root, ["Ec2"])
    assert out["ds"] is not None and out["imds"] == "v1"
    assert "does not offer IMDSv2 (HTTP 405); using IMDSv1" in out["_stderr"]
    forbidden = find_in_guest(lab, lab.root, ["Ec2"], cfg={"datasource": {"Ec2": {"imdsv1": False}}})
    assert forbidden["ds"] is None
    assert "does not offer IMDSv2 and datasource.Ec2.imdsv1 is false" in forbidden["_stderr"]


def test_403_on_token_means_disabled_fast(lab):
    serve(lab, "--imdsv2", "forbidden")
    out = find_in_guest(lab, lab.root, ["Ec2"], cfg={"datasource": {"Ec2": {"max_wait": 10}}})
    assert out["ds"] is None and out["took"] < 3  # answered: no waiting up to max_wait
    assert "HTTP 403" in out["_stderr"] and "disabled" in out["_stderr"]
    assert not any(r["method"] == "GET" for r in requests(lab))


def test_ipv6_endpoint_wins_when_ipv4_is_a_black_hole(tmp_path):
    lab = NetLab(metadata_v4=False)  # 169.254.169.254 is routed to the cloud, which drops it
    try:
        root = tmp_path / "root"
        write_tree(root, {"sys/class/dmi/id/sys_vendor": "Amazon EC2\n"})
        lab.tree, lab.log = tmp_path / "tree", tmp_path / "log"
        ec2_tree(lab.tree)
        serve(lab, "--imdsv2", "on", listen=("[fd00:ec2::254]:80",))
        out = find_in_guest(lab, str(root), ["Ec2"])
        assert out["ds"] is not None, out["_stderr"]
        assert out["address"] == "http://[fd00:ec2::254]"
        assert out["took"] < 1.5
        assert all(r["host"] == "[fd00:ec2::254]" for r in requests(lab))
    finally:
        lab.close()


def test_not_ec2_costs_nothing(lab, tmp_path):
    serve(lab, "--imdsv2", "on")
    bare = tmp_path / "bare"
    write_tree(bare, {"sys/class/dmi/id/sys_vendor": "QEMU\n"})
    out = find_in_guest(lab, str(bare), ["Ec2"])
    assert out["ds"] is None and out["tried"] == [] and requests(lab) == []
    # ... unless the user says so
    out = find_in_guest(lab, str(bare), ["Ec2"], cfg={"datasource": {"Ec2": {"strict_id": False}}})
    assert out["ds"] is not None


def test_network_config_names_system_nics():
    from cloudseed.agent.datasources.ec2 import network_config_from_macs

    cfg = network_config_from_macs({MAC0.upper(): {"device-number": "0", "local-ipv4s": "10.0.0.5"}},
                                   system_macs={MAC0: "ens5"})
    assert cfg == {"version": 2, "ethernets": {"ens5": {"match": {"macaddress": MAC0}, "set-name": "ens5",
                                                        "dhcp4": True, "dhcp6": False}}}
