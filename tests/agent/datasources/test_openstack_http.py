"""OpenStack metadata service over HTTP: a server on 169.254.169.254 in one namespace, the agent in another."""

from __future__ import annotations

import json
import os

import pytest

from tests.agent.datasources.netlab import PYTHON, REPO, NetLab, find_in_guest, write_tree

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

META = {"uuid": "83679162-1378-4288-a2d4-70e13ec132aa", "hostname": "os-host", "name": "os-host",
        "availability_zone": "az-2", "public_keys": {"k": "ssh-ed25519 AAAAosKey os@example"},
        "admin_pass": "pw", "random_seed": "c2VlZA=="}
NETWORK_DATA = {"links": [{"id": "l0", "type": "phy", "ethernet_mac_address": "fa:16:3e:11:22:33"}],
                "networks": [{"id": "n0", "link": "l0", "type": "ipv4_dhcp"}], "services": []}


def os_tree(top, version="2018-08-27", meta=None, network=None):
    listing = "2012-08-10\n2013-04-04\n2016-06-30\n2018-08-27\n2099-12-31\nlatest\n"
    files = {"openstack/.listing": listing}
    for v in (version, "2012-08-10"):
        files.update({
            f"openstack/{v}/meta_data.json": json.dumps(meta or META) if v == version else json.dumps(
                {"uuid": "old-version"}),
            f"openstack/{v}/user_data": f"#cloud-config\nfrom: {v}\n",
            f"openstack/{v}/vendor_data.json": json.dumps({"cloud-init": "#cloud-config\nvd: 1\n"}),
            f"openstack/{v}/vendor_data2.json": json.dumps({"static": {}, "cloud-init": "#cloud-config\nvd: 2\n"}),
            f"openstack/{v}/network_data.json": network if network is not None else json.dumps(NETWORK_DATA),
            f"openstack/{v}/password": "encrypted-password-blob",
        })
    write_tree(top, files)


@pytest.fixture
def lab(tmp_path):
    lab = NetLab()
    root = tmp_path / "root"
    write_tree(root, {"sys/class/dmi/id/product_name": "OpenStack Nova\n", "etc/hostname": "x\n"})
    lab.root = str(root)
    lab.tree = tmp_path / "tree"
    lab.log = tmp_path / "requests.log"
    lab.rules_file = tmp_path / "rules.json"
    yield lab
    lab.close()


def serve(lab, rules=None, listen=("169.254.169.254:80",)):
    lab.rules_file.write_text(json.dumps(rules or {}))
    args = [PYTHON, os.path.join(REPO, "tests/agent/datasources/mdserver.py"), "--tree", str(lab.tree),
            "--rules", str(lab.rules_file), "--log", str(lab.log)]
    for spec in listen:
        args += ["--listen", spec]
    lab.start_in_cloud(*args, ready="ready")


def requests(lab):
    return [json.loads(line) for line in lab.log.read_text().splitlines()] if lab.log.exists() else []


def test_reads_the_newest_known_version(lab):
    os_tree(lab.tree)
    serve(lab)
    out = find_in_guest(lab, lab.root, ["OpenStack"])
    ds = out["ds"]
    assert ds is not None, out["_stderr"]
    assert ds["metadata"]["instance-id"] == META["uuid"]
    assert ds["metadata"]["local-hostname"] == "os-host"
    assert ds["userdata_raw"] == "#cloud-config\nfrom: 2018-08-27\n"
    assert ds["vendordata_raw"] == "#cloud-config\nvd: 1\n"
    assert ds["vendordata2_raw"] == "#cloud-config\nvd: 2\n"
    assert ds["network_config"] == NETWORK_DATA
    assert ds["public_keys"] == ["ssh-ed25519 AAAAosKey os@example"]
    assert ds["availability_zone"] == "az-2"
    assert ds["extra"] == {"admin_pass": "pw", "password": "encrypted-password-blob"}
    assert out["address"] == "http://169.254.169.254"
    paths = [r["path"] for r in requests(lab)]
    assert paths[0] == "/openstack"
    assert not any("2099-12-31" in p for p in paths)
    assert out["took"] < 2


def test_not_possible_without_dmi_costs_nothing(lab, tmp_path):
    os_tree(lab.tree)
    serve(lab)
    bare = tmp_path / "bare"
    bare.mkdir()
    out = find_in_guest(lab, str(bare), ["OpenStack"])
    assert out["ds"] is None and out["tried"] == []
    assert requests(lab) == []


def test_500_then_200_and_broken_optional_files(lab):
    os_tree(lab.tree, network='{"links": [')
    serve(lab, rules={"/openstack/2018-08-27/meta_data.json": {"status": 500, "times": 1},
                      "/openstack/2018-08-27/user_data": {"redirect": "http://10.9.9.9/evil"},
                      "/openstack/2018-08-27/vendor_data.json": {"content_type": "text/html"}})
    out = find_in_guest(lab, lab.root, ["OpenStack"])
    ds = out["ds"]
    assert ds is not None, out["_stderr"]
    assert ds["metadata"]["instance-id"] == META["uuid"]
    assert ds["userdata_raw"] is None
    assert ds["network_config"] is None
    assert ds["vendordata_raw"] == "#cloud-config\nvd: 1\n"
    text = out["_stderr"]
    assert "http://169.254.169.254/openstack/2018-08-27/meta_data.json: HTTP 500" in text
    assert "http://169.254.169.254/openstack/2018-08-27/user_data: refused redirect to another host" in text
    assert "http://169.254.169.254/openstack/2018-08-27/network_data.json: invalid JSON" in text


def test_slow_loris_and_huge_meta_data_are_bounded(lab):
    os_tree(lab.tree)
    serve(lab, rules={"/openstack/2018-08-27/meta_data.json": {"slowloris": 60},
                      "/openstack/2018-08-27/user_data": {"huge": 1 << 30}})
    out = find_in_guest(lab, lab.root, ["OpenStack"], cfg={"datasource": {"OpenStack": {"timeout": 1, "retries": 1}}})
    assert out["ds"] is None
    assert out["took"] < 6
    assert "meta_data.json: no complete answer within 1s" in out["errors"][0]


def test_huge_user_data_is_refused_but_the_instance_is_found(lab):
    os_tree(lab.tree)
    serve(lab, rules={"/openstack/2018-08-27/user_data": {"huge": 1 << 30}})
    out = find_in_guest(lab, lab.root, ["OpenStack"])
    assert out["ds"] is not None and out["ds"]["userdata_raw"] is None
    assert "user_data: response of 1073741824 bytes is larger than the limit" in out["_stderr"]
    assert out["took"] < 3


def test_no_server_gives_up_within_max_wait(lab):
    # nothing listens: 169.254.169.254 answers with RST, retried until max_wait
    out = find_in_guest(lab, lab.root, ["OpenStack"], cfg={"datasource": {"OpenStack": {"max_wait": 1.5}}})
    assert out["ds"] is None and out["tried"] == ["OpenStack"]
    assert 1.2 < out["took"] < 2.5
    assert "no metadata service answered at http://169.254.169.254 within 1.5s" in out["_stderr"]


def test_local_stage_through_ephemeral_dhcp(tmp_path):
    """Before the network is up: DHCP on the fallback NIC, read the service, leave nothing behind."""
    lab = NetLab(guest_configured=False)
    try:
        root = tmp_path / "root"
        write_tree(root, {"sys/class/dmi/id/product_name": "OpenStack Nova\n"})
        lab.tree, lab.log, lab.rules_file = tmp_path / "tree", tmp_path / "log", tmp_path / "rules.json"
        os_tree(lab.tree)
        serve(lab)
        s = lab.subnet
        lab.start_in_cloud("dnsmasq", "--keep-in-foreground", "--no-daemon", "--port=0", "--bind-interfaces",
                           f"--interface={lab.cloud_if}", "--except-interface=lo", "--no-resolv", "--no-hosts",
                           f"--dhcp-range=10.77.{s}.50,10.77.{s}.60,255.255.255.0,2m",
                           f"--dhcp-option=3,{lab.cloud_ip}", f"--dhcp-leasefile={tmp_path}/leases")
        out = find_in_guest(lab, str(root), ["OpenStack"], stage="local")
        assert out["ds"] is not None, out["_stderr"]
        assert out["ds"]["network_config"] == NETWORK_DATA
        assert "temporary DHCP lease on " + lab.guest_if in out["_stderr"]
        leftovers = lab.guest_exec("ip", "-4", "-o", "addr", "show", "dev", lab.guest_if).stdout
        routes = lab.guest_exec("ip", "-4", "route", "show").stdout
        assert leftovers.strip() == "" and routes.strip() == ""
        # without DMI identification the local stage does not even try DHCP
        bare = tmp_path / "bare"
        write_tree(bare, {"etc/hostname": "x\n"})
        out = find_in_guest(lab, str(bare), ["OpenStack"], stage="local",
                            cfg={"datasource": {"OpenStack": {"detect": "always"}}})
        assert out["ds"] is None and "temporary DHCP" not in out["_stderr"]
    finally:
        lab.close()


def test_cloudseed_init_network_stage_in_the_guest(lab):
    os_tree(lab.tree)
    serve(lab)
    write_tree(lab.root, {"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n",
                          "etc/os-release": "ID=debian\nVERSION_ID=12\n",
                          "etc/cloudseed/cloud.cfg.d/90-test.cfg": "datasource_list: [OpenStack, None]\n"
                                                                   "ssh_genkeytypes: []\ncloud_init_modules: []\n"})
    proc = lab.guest_exec(os.path.join(REPO, ".venv", "bin", "cloudseed"), "--root", lab.root, "init",
                          check=False, timeout=120)
    iid = os.path.join(lab.root, "var/lib/cloudseed/data/instance-id")
    assert os.path.exists(iid), proc.stderr[-2000:]
    with open(iid) as f:
        assert f.read().strip() == META["uuid"]
