"""The RbxCloud datasource: cloud.json and user.data on real FAT (and ISO) images labelled CLOUDMD,
read in userspace; one attached as a loop device for the whole search; compared with cloud-init
22.4's ``read_user_data_callback`` reading the same files; broken images and documents.
"""

from __future__ import annotations

import json

import pytest

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.datasources._disk_image import DiskError, extracted
from cloudseed.agent.datasources.rbxcloud import RbxCloud, RbxError, read_dir
from cloudseed.agent.state import Paths
from tests.agent.datasources.diskimages import loop_device, make_iso, make_vfat, write_tree

HASH = "$6$rounds=4096$salty$Qx0GQb6Hq0d8b1oUmAEzvB.5oYkq0h2x4aNqf0xgS6O4rJ8N3dQmW1q9j2l8uH0kP7n2bZyX0c1vR3tW5s6u/"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvVFenV4n3KLcbe42bjG/VeA8aGFXsM+fbfMA9qFdrd rbx@example"
CLOUD = {
    "vm": {"_id": "5beab44f680cffd11f0e60fc", "name": "rbx-vm-1"},
    "netadp": [
        {"macaddress": "00:15:5D:FF:0F:03", "network": {"netmask": "255.255.248.0", "gateway": "62.181.8.1",
                                                        "dns": {"nameservers": ["8.8.8.8", "8.8.4.4"]}},
         "ip": [{"address": "62.181.8.174"}]},
        {"macaddress": "00:15:5d:ff:0f:24", "network": {"netmask": "255.255.255.0", "gateway": "10.209.78.1",
                                                        "dns": {"nameservers": ["9.9.9.9"]}},
         "ip": [{"address": "10.209.78.11"}, {"address": "10.209.78.12"}]},
    ],
    "additionalMetadata": {"username": "guru", "sshKeys": [KEY], "password": {"sha512": HASH}},
}
USER_DATA = "#cloud-config\nruncmd: [[touch, /run/rbx]]\n"


def files(cloud=None, user=USER_DATA) -> dict:
    out = {"cloud.json": json.dumps(CLOUD if cloud is None else cloud)}
    if user is not None:
        out["user.data"] = user
    return out


def image(tmp_path, kind="vfat", label="CLOUDMD", **kw) -> str:
    src = write_tree(str(tmp_path / f"src-{kind}-{label}"), files(**kw))
    if kind == "vfat":
        return make_vfat(src, str(tmp_path / f"{label}.img"), label)
    return make_iso(src, str(tmp_path / f"{label}.iso"), label)


def context(target) -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage=LOCAL)


@pytest.mark.parametrize("kind,label", [("vfat", "CLOUDMD"), ("iso", "cloudmd")])
def test_real_images(tmp_path, kind, label):
    with extracted(image(tmp_path, kind, label)) as top:
        r = read_dir(top, "img", etc_hosts_exists=True)
    assert r["metadata"] == {"instance-id": CLOUD["vm"]["_id"], "local-hostname": "rbx-vm-1", "public-keys": []}
    assert r["userdata"] == USER_DATA.encode()
    eth0, eth1 = r["network_config"]["config"]
    assert eth0["name"] == "eth0" and eth0["mac_address"] == "00:15:5d:ff:0f:03"
    assert eth0["subnets"] == [{"type": "static", "address": "62.181.8.174", "netmask": "255.255.248.0",
                                "control": "auto", "gateway": "62.181.8.1", "dns_nameservers": ["8.8.8.8", "8.8.4.4"]}]
    assert [s["address"] for s in eth1["subnets"]] == ["10.209.78.11", "10.209.78.12"]
    user = r["cfg"]["system_info"]["default_user"]
    assert user["name"] == "guru" and user["passwd"] == HASH and user["ssh_authorized_keys"] == [KEY]
    assert r["cfg"]["ssh_pwauth"] is True and r["cfg"]["manage_etc_hosts"] is False


@pytest.mark.parametrize("cloud,message", [
    ({"vm": {"_id": "x", "name": "y"}}, "no 'vm' or no 'netadp'"),
    ({"vm": {"name": "y"}, "netadp": []}, "'vm' lacks '_id'"),
    ({**CLOUD, "netadp": [{"macaddress": "00:11:22:33:44:55", "ip": []}]}, "netadp[0] lacks 'network'"),
    ({**CLOUD, "netadp": {"a": 1}}, "'netadp' is not a list"),
])
def test_bad_cloud_json_names_the_key(tmp_path, cloud, message):
    with extracted(image(tmp_path, cloud=cloud)) as top, pytest.raises(RbxError) as e:
        read_dir(top, "/dev/sdz", True)
    assert "/dev/sdz/cloud.json" in str(e.value) and message in str(e.value)


def test_truncated_json_and_truncated_image(tmp_path):
    src = write_tree(str(tmp_path / "trunc"), {"cloud.json": json.dumps(CLOUD)[:50]})
    img = make_vfat(src, str(tmp_path / "t.img"), "CLOUDMD")
    with extracted(img) as top, pytest.raises(RbxError, match="not JSON"):
        read_dir(top, "img", True)
    whole = image(tmp_path)
    cut = str(tmp_path / "cut.img")
    with open(whole, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(4096))  # the boot sector and part of the FAT: the files lie beyond
    with pytest.raises(DiskError, match="cut.img"), extracted(cut):
        pass


def test_no_username_no_default_user(tmp_path):
    """Named difference: 22.4 configures a default user named None; here the image's stays."""
    cloud = {**CLOUD, "additionalMetadata": {"sshKeys": [KEY]}}
    with extracted(image(tmp_path, cloud=cloud)) as top:
        r = read_dir(top, "img", True)
    assert "system_info" not in r["cfg"] and r["cfg"]["ssh_pwauth"] is True


def test_no_cloud_json_is_not_rbxcloud(tmp_path):
    src = write_tree(str(tmp_path / "other"), {"user.data": USER_DATA})
    with extracted(make_vfat(src, str(tmp_path / "o.img"), "CLOUDMD")) as top:
        assert read_dir(top, "img", True) is None


def test_agent_search_on_a_loop_device(target, tmp_path):
    with loop_device(image(tmp_path)) as device:
        assert device in (RbxCloud.why(context(target)) or "")
        search = find_datasource(context(target), ["RbxCloud"])
    ds = search.datasource
    assert ds is not None, search.errors
    assert ds.instance_id == CLOUD["vm"]["_id"] and ds.local_hostname == "rbx-vm-1"
    assert ds.subplatform == f"config-disk ({device})" and ds.network_config["version"] == 1
    cfg = ds.extra["cloud_config"]
    assert cfg["manage_etc_hosts"] is True  # the target root has no /etc/hosts
    assert cfg["system_info"]["default_user"]["passwd"] == HASH
    # the hash lives in the private extra only, never in the metadata
    assert HASH not in json.dumps(ds.metadata) and HASH not in json.dumps(ds.raw)


REFERENCE = r"""
import json, sys
from cloudinit.sources import DataSourceRbxCloud as m
m.get_manage_etc_hosts = lambda: False  # the host's /etc/hosts exists; said here so it is explicit
r = m.read_user_data_callback(sys.argv[1])
print(json.dumps(r))
"""


def test_same_data_as_cloud_init(tmp_path):
    from tests.reference import reference_python

    src = write_tree(str(tmp_path / "ref"), files())
    ref = json.loads(reference_python(REFERENCE, src).stdout)
    with extracted(make_vfat(src, str(tmp_path / "same.img"), "CLOUDMD")) as top:
        ours = read_dir(top, "img", etc_hosts_exists=True)
    assert ours["metadata"] == ref["metadata"]
    assert ours["userdata"].decode() == ref["userdata"]
    assert ours["network_config"] == ref["cfg"]["network_config"]
    ref_cfg = dict(ref["cfg"])
    del ref_cfg["network_config"]  # ours goes to network_config, not into the config
    assert ours["cfg"] == ref_cfg


def test_agent_keeps_the_password_hash_out_of_world_readable_instance_data(target, tmp_path):
    import os
    import stat

    target.write("/etc/cloudseed/cloud.cfg.d/90-test.cfg",
                 "datasource_list: [RbxCloud, None]\ncloud_init_modules: [set_hostname]\n"
                 "cloud_config_modules: []\ncloud_final_modules: []\n")
    target.write("/usr/lib/systemd/systemd-networkd", "#!/bin/sh\n", mode=0o755)
    target.write("/sys/class/net/eth0/address", "00:15:5d:ff:0f:03\n")
    target.makedirs("/sys/class/net/eth0/device")
    from cloudseed.agent.boot.stages import Agent

    with loop_device(image(tmp_path)) as device:
        agent = Agent(target)
        assert agent.run_local() == 0
        assert agent.run_network() == 0
    public = target.read_text("/run/cloudseed/instance-data.json")
    data = json.loads(public)
    assert data["v1"]["platform"] == "rbxcloud" and data["v1"]["subplatform"] == f"config-disk ({device})"
    assert data["v1"]["instance_id"] == CLOUD["vm"]["_id"] and HASH not in public
    sensitive_path = "/run/cloudseed/instance-data-sensitive.json"
    sensitive = target.path(sensitive_path)
    assert stat.S_IMODE(os.stat(sensitive).st_mode) == 0o600 and HASH in target.read_text(sensitive_path)
    assert target.read_text("/etc/hostname").strip() == "rbx-vm-1"
    rendered = "".join(target.read_text(f"/etc/systemd/network/{f}") for f in target.listdir("/etc/systemd/network"))
    assert "62.181.8.174/21" in rendered and "00:15:5d:ff:0f:03" in rendered


def test_both_generators_enable_the_agent_on_a_cloudmd_disk(tmp_path):
    from tests.agent.datasources.diskimages import generator_verdicts

    with loop_device(image(tmp_path)) as device:
        verdicts = generator_verdicts(str(tmp_path), {})
    for kind, verdict in verdicts.items():
        assert verdict.startswith("enabled"), (kind, verdict)
    assert f"RbxCloud (filesystem labelled CLOUDMD on {device}" in verdicts["python"]
