"""The SmartOS datasource over a real pty (and an LX zone's Unix socket) answered by a Joyent host emulation.

``serial_responders.JoyentResponder`` answers the metadata protocol V2 on the master side of a pty;
the agent reads the slave as its ``serial_device``. Debian's cloud-init 22.4 ``DataSourceSmartOS``
(with its pyserial) reads the same kind of responder through its own pty: the instance id, keys,
user-data, vendor-data and the converted network config must agree. Bad hosts (silent, garbage
lines, a wrong CRC, half an answer) cost a bounded wait and a clear error.
"""

from __future__ import annotations

import base64
import json
import os
import time

import pytest

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.datasources.smartos import JoyentMetadataError, SmartOS, convert_network_data
from cloudseed.agent.state import Paths
from cloudseed.agent.state.instance_data_json import build, redact
from tests.agent.datasources.serial_responders import JoyentResponder, Pty, run_reference, serve_joyent_socket

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvVFenV4n3KLcbe42bjG/VeA8aGFXsM+fbfMA9qFdrd root@triton"
USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-smartos, content: seen}\n"
NICS = [
    {"interface": "net0", "mac": "90:b8:d0:ae:64:51", "vlan_id": 324, "nic_tag": "external",
     "gateway": "8.12.42.1", "gateways": ["8.12.42.1"], "netmask": "255.255.255.0", "ip": "8.12.42.102",
     "ips": ["8.12.42.102/24", "2001:4800:78ff:1b:be76:4eff:fe06:96b3/64"], "network_uuid": "992fc7ce",
     "model": "virtio", "mtu": 1500, "primary": True},
    {"interface": "net1", "mac": "90:b8:d0:bd:4f:9c", "vlan_id": 600, "nic_tag": "internal",
     "netmask": "255.255.255.0", "ip": "10.210.1.217", "ips": ["10.210.1.217/24"], "gateways": ["10.210.1.1"],
     "network_uuid": "98657fdf", "model": "virtio", "mtu": 1500},
    {"interface": "net2", "mac": "90:b8:d0:bd:4f:9d", "ips": ["dhcp"], "mtu": 9000},
]
ROUTES = [{"linklocal": False, "dst": "3.0.0.0/8", "gateway": "8.12.42.3"},
          {"linklocal": False, "dst": "4.0.0.0/8", "gateway": "10.210.1.4"}]
HOST = {
    "sdc:uuid": "a7b7c4a1-5c46-4b6e-9c2e-0d3b1f8e2a11",
    "hostname": "web-1",
    "sdc:hostname": "web-1-sdc",
    "root_authorized_keys": KEY + "\n",
    "cloud-init:user-data": USER_DATA,
    "user-data": "legacy mdata user data\n",
    "user-script": "echo user-script ran\n",
    "sdc:operator-script": "#!/bin/sh\necho operator\n",
    "sdc:datacenter_name": "us-east-1",
    "sdc:dns_domain": "example.triton",
    "iptables_disable": "false",
    "motd_sys_info": "true",
    "sdc:nics": json.dumps(NICS),
    "sdc:routes": json.dumps(ROUTES),
    "sdc:resolvers": json.dumps(["8.8.8.8", "8.8.4.4"]),
}


@pytest.fixture
def pty():
    ptys: list[Pty] = []
    responders: list[JoyentResponder] = []

    def start(data=None, **kw) -> tuple[Pty, JoyentResponder]:
        p = Pty()
        r = JoyentResponder(p.master, HOST if data is None else data, **kw)
        ptys.append(p)
        responders.append(r)
        return p, r

    yield start
    for r in responders:
        r.close()
    for p in ptys:
        p.close()


def context(target, device: str | None = None, **ds) -> DatasourceContext:
    cfg = {"datasource": {"SmartOS": {**({"serial_device": device} if device else {}), **ds}}}
    return DatasourceContext(root=target, cfg=cfg, cmdline="", paths=Paths(target), stage=LOCAL)


def smartdc(target) -> None:
    target.write("/sys/class/dmi/id/product_name", "SmartDC HVM\n")


def test_detection_is_local_and_free(target):
    assert SmartOS.why(context(target)) is None
    target.write("/sys/class/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)\n")
    assert SmartOS.why(context(target)) is None
    start = time.monotonic()
    search = find_datasource(context(target), ["SmartOS"])
    assert search.tried == [] and search.datasource is None and time.monotonic() - start < 0.5
    smartdc(target)
    assert SmartOS.why(context(target)) == "DMI product_name is 'SmartDC HVM'"


def test_reads_the_host_over_a_pty(target, pty):
    smartdc(target)
    port, host = pty(noise=b"stale boot output\nV2_OK\n")  # drained before the guest speaks
    target.write("/var/svc/provisioning", "")
    ds = find_datasource(context(target, port.path), ["SmartOS"]).datasource
    assert ds is not None and ds.name == "SmartOS"
    assert ds.instance_id == HOST["sdc:uuid"] and ds.local_hostname == "web-1"
    assert ds.public_keys == [KEY] and ds.userdata_raw == USER_DATA.encode()
    assert ds.availability_zone == "us-east-1" and ds.subplatform == f"serial ({port.path})"
    assert ds.metadata["iptables_disable"] == "false" and ds.metadata["hostname"] == "web-1-sdc"
    # the built-in vendor-data runs the scripts written to the instance's data directory
    assert ds.vendordata_raw.startswith(b"#cloud-boothook\n")
    data_d = f"/var/lib/cloudseed/instances/{HOST['sdc:uuid']}/data"
    assert f"{data_d}/user-script".encode() in ds.vendordata_raw
    assert target.read_text(f"{data_d}/user-script") == "#!/bin/bash\necho user-script ran\n"
    assert os.stat(target.path(f"{data_d}/user-script")).st_mode & 0o777 == 0o700
    assert target.read_text(f"{data_d}/operator-script") == HOST["sdc:operator-script"]
    assert os.readlink(target.path_nofollow("/var/db/user-script")) == f"{data_d}/user-script"
    assert target.read_text("/var/db/mdata-user-data") == "legacy mdata user data\n"
    assert target.exists("/var/svc/provision_success") and not target.exists("/var/svc/provisioning")
    # user and vendor data are not world-readable instance data
    public = redact(build(target, ds, {}))
    assert "write_files" not in json.dumps(public) and "user-script ran" not in json.dumps(public)
    assert public["ds"]["meta_data"]["instance-id"] == HOST["sdc:uuid"]
    assert "KEYS" in host.requests  # the KVM client's legacy base64 markers were looked at
    # a KVM guest's second disk is its ephemeral disk, set up as cloud-init's built-in config does
    assert ds.metadata["block-device-mapping"] == {"ephemeral0": "/dev/vdb"}
    assert ds.extra["cloud_config"]["fs_setup"] == [{"label": "ephemeral0", "filesystem": "ext4",
                                                     "device": "ephemeral0"}]
    assert ds.extra["cloud_config"]["disk_setup"]["ephemeral0"]["overwrite"] is False
    net = ds.network_config
    assert net["config"][0]["subnets"][0] == {
        "type": "static", "address": "8.12.42.102/24", "gateway": "8.12.42.1",
        "routes": [{"network": "3.0.0.0/8", "gateway": "8.12.42.3"}, {"network": "4.0.0.0/8", "gateway": "10.210.1.4"}]}
    assert net["config"][2]["subnets"] == [{"type": "dhcp4"}]
    assert net["config"][-1] == {"type": "nameserver", "address": ["8.8.8.8", "8.8.4.4"],
                                 "search": ["example.triton"]}


def test_legacy_base64_markers_unlike_cloud_init(target, pty):
    """Deliberate difference: cloud-init 22.4 cuts "b64" (3 characters) off a b64-<key> marker and reads
    "-<key>", so a b64- marker never takes effect there; base64_keys and base64_all work in both."""
    smartdc(target)
    data = {"sdc:uuid": "iid-b64", "cloud-init:user-data": base64.b64encode(b"#cloud-config\n{}\n").decode(),
            "b64-cloud-init:user-data": "true", "hostname": "h"}
    port, _ = pty(data)
    ds = find_datasource(context(target, port.path), ["SmartOS"]).datasource
    assert ds.userdata_raw == b"#cloud-config\n{}\n"
    assert ds.network_config is None  # no sdc:nics: the agent's fallback network applies
    port, _ = pty({**data, "b64-cloud-init:user-data": "false", "base64_keys": "cloud-init:user-data,other"})
    ds = find_datasource(context(target, port.path), ["SmartOS"]).datasource
    assert ds.userdata_raw == data["cloud-init:user-data"].encode()  # the marker says no
    port, _ = pty({"sdc:uuid": "aWlkLWFsbA==", "base64_all": "true", "hostname": "aA==",
                   "root_authorized_keys": KEY})
    ds = find_datasource(context(target, port.path), ["SmartOS"]).datasource
    # base64_all decodes everything but cloud-init's exceptions (sdc:uuid is not one: its list joins
    # "sdc:uuid" and "user-data" into one name)
    assert (ds.instance_id, ds.local_hostname, ds.public_keys) == ("iid-all", "h", [KEY])


def test_lx_brand_zone_socket(target):
    sock = target.path_nofollow("/native/.zonecontrol/metadata.sock")
    server, responders = serve_joyent_socket(sock, {k: v for k, v in HOST.items() if k != "sdc:nics"})
    try:
        assert SmartOS.why(context(target)) == "LX-brand zone socket /native/.zonecontrol/metadata.sock"
        ds = find_datasource(context(target), ["SmartOS"]).datasource
        assert ds is not None and ds.instance_id == HOST["sdc:uuid"]
        assert ds.subplatform.startswith("socket (") and ds.extra["smartos_type"] == "lx-brand"
        assert "KEYS" not in responders[0].requests  # no legacy base64 on the socket
        assert "cloud_config" not in ds.extra and "block-device-mapping" not in ds.metadata  # no disks in a zone
    finally:
        server.close()
        for r in responders:
            r.close()


@pytest.mark.parametrize("mode,message", [
    ("silent", "out of time .*no complete line in time .nothing received"),
    ("crc", "CRC mismatch"),
    ("truncate", "no complete line in time"),
])
def test_a_bad_host_is_bounded_and_named(target, pty, mode, message):
    smartdc(target)
    port, _ = pty(mode=mode)
    ds = SmartOS(context(target, port.path, timeout=0.5, max_wait=2))
    start = time.monotonic()
    with pytest.raises(JoyentMetadataError, match=message):
        ds.fetch()
    assert time.monotonic() - start < 3
    search = find_datasource(context(target, port.path, timeout=0.5, max_wait=2), ["SmartOS"])
    assert search.datasource is None and "SmartOS" in search.errors[0]


def test_garbage_lines_are_skipped_unlike_cloud_init(target, pty):
    """Deliberate difference: cloud-init 22.4 takes a noise line as the answer (NOTFOUND, or a crash
    when it holds 'SUCCESS'); the agent skips lines that are not V2 frames until its own answer."""
    smartdc(target)
    port, _ = pty(mode="garbage")
    ds = find_datasource(context(target, port.path, timeout=1, max_wait=10), ["SmartOS"]).datasource
    assert ds is not None and ds.instance_id == HOST["sdc:uuid"] and ds.public_keys == [KEY]


def test_no_port(target):
    smartdc(target)
    with pytest.raises(JoyentMetadataError, match="No such file"):
        SmartOS(context(target, "/nonexistent/ttyS9")).fetch()


def test_a_nic_without_interface_is_a_clear_error():
    with pytest.raises(ValueError, match="interface"):
        convert_network_data([{"mac": "aa:bb:cc:dd:ee:ff", "ips": ["dhcp"]}])


REFERENCE = """
from cloudinit.sources import DataSourceSmartOS as m
m.LEGACY_USER_D = tmp + "/var-db"
fake_dmi("SmartDC HVM")
src = m.DataSourceSmartOS({"datasource": {"SmartOS": {"serial_device": sys.argv[2], "serial_timeout": 5}}},
                          distro, paths)
ok = src.get_data()
report(src, ok)
"""


@pytest.mark.parametrize("data", [HOST, {k: v for k, v in HOST.items() if k not in ("hostname", "user-script")}],
                         ids=["full", "sdc-hostname"])
def test_same_as_cloud_init_22_4(target, pty, tmp_path, data):
    smartdc(target)
    port, _ = pty(data)
    ref_port, _ = pty(data)
    ds = find_datasource(context(target, port.path), ["SmartOS"]).datasource
    ref = run_reference(REFERENCE, str(tmp_path), ref_port.path)
    assert ref["ok"] is True
    assert ds.instance_id == ref["instance_id"]
    assert ds.local_hostname == ref["hostname"]
    assert ds.public_keys == ref["keys"]
    assert ds.userdata_raw.decode() == ref["userdata"]
    assert ds.availability_zone == ref["availability_zone"]
    assert ds.network_config == ref["network_config"]
    for key in ("instance-id", "local-hostname", "public-keys", "user-script", "legacy-user-data", "user-data",
                "iptables_disable", "motd_sys_info", "availability_zone", "operator-script", "hostname",
                "dns_domain", "network-data", "dns_servers", "routes"):
        assert ds.metadata[key] == ref["metadata"][key], key
    # the built-in vendor-data is the same boothook, naming each implementation's own paths
    assert ds.vendordata_raw.decode().splitlines()[:2] == ref["vendordata"].splitlines()[:2]


def test_agent_provisions_a_root_over_the_pty(target, pty):
    smartdc(target)
    port, _ = pty({**HOST, "sdc:vendor-data": "#cloud-config\nvendor_seen: true\n"})
    target.write("/etc/cloudseed/cloud.cfg.d/90-test.cfg",
                 f"datasource_list: [SmartOS, None]\ndatasource: {{SmartOS: {{serial_device: {port.path}}}}}\n"
                 "cloud_init_modules: [write_files, set_hostname]\ncloud_config_modules: []\n"
                 "cloud_final_modules: []\n")
    target.write("/usr/lib/systemd/systemd-networkd", "#!/bin/sh\n", mode=0o755)
    from cloudseed.agent.boot.stages import Agent

    agent = Agent(target)
    assert agent.run_local() == 0
    assert agent.run_network() == 0
    v1 = json.loads(target.read_text("/run/cloudseed/instance-data.json"))["v1"]
    assert (v1["cloud_name"], v1["platform"], v1["instance_id"], v1["availability_zone"]) == \
        ("joyent", "joyent", HOST["sdc:uuid"], "us-east-1")
    assert target.read_text("/etc/from-smartos") == "seen"
    assert target.read_text("/etc/hostname").strip() == "web-1"
    rendered = "".join(target.read_text(f"/etc/systemd/network/{f}") for f in target.listdir("/etc/systemd/network"))
    assert "8.12.42.102/24" in rendered and "90:b8:d0:ae:64:51" in rendered and "8.8.8.8" in rendered


REFERENCE_LX = """
from cloudinit.sources import DataSourceSmartOS as m
m.LEGACY_USER_D = tmp + "/var-db"
m.get_smartos_environ = lambda uname_version=None, product_name=None: m.SMARTOS_ENV_LX_BRAND  # uname: BrandZ
src = m.DataSourceSmartOS({"datasource": {"SmartOS": {"metadata_sockfile": sys.argv[2]}}}, distro, paths)
ok = src.get_data()
report(src, ok)
"""


def test_lx_zone_socket_same_as_cloud_init_22_4(target, tmp_path):
    data = {**HOST, "base64_all": "true"}  # no legacy base64 on the socket, in either
    sock = target.path_nofollow("/native/.zonecontrol/metadata.sock")
    os.makedirs(tmp_path / "r", exist_ok=True)
    server, responders = serve_joyent_socket(sock, data)
    ref_server, ref_responders = serve_joyent_socket(str(tmp_path / "r" / "md.sock"), data)
    try:
        ds = find_datasource(context(target), ["SmartOS"]).datasource
        ref = run_reference(REFERENCE_LX, str(tmp_path), str(tmp_path / "r" / "md.sock"))
    finally:
        for s in (server, ref_server):
            s.close()
        for r in responders + ref_responders:
            r.close()
    assert ref["ok"] is True
    assert (ds.instance_id, ds.local_hostname, ds.public_keys) == (ref["instance_id"], ref["hostname"], ref["keys"])
    assert ds.userdata_raw.decode() == ref["userdata"] and ds.network_config == ref["network_config"]


def test_a_zone_socket_closing_mid_reply(target):
    sock = target.path_nofollow("/native/.zonecontrol/metadata.sock")
    server, responders = serve_joyent_socket(sock, HOST, mode="close")
    try:
        start = time.monotonic()
        with pytest.raises(JoyentMetadataError, match="closed by the other end after b'V2 "):
            SmartOS(context(target, timeout=2, max_wait=4)).fetch()
        assert time.monotonic() - start < 1
    finally:
        server.close()
        for r in responders:
            r.close()
