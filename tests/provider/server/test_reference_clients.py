"""Debian's cloud-init 22.4 as a real client, in network namespaces where 169.254.169.254 is us.

Topology (all namespaces created here): ``srv`` runs ``cloudseed serve`` on 169.254.169.254:80;
``gst`` (10.77.0.5) is wired to it directly; ``far`` (10.78.0.5) reaches it through the router
namespace ``rtr``, two hops away, which is what the IMDSv2 hop limit is about.
The reference's datasource classes run inside ``gst`` with their platform checks patched:
``detect_openstack`` (DMI) returns True, and DataSourceEc2's ``identify_platform`` says AWS so
that it uses IMDSv2 tokens, as on EC2. Everything else is the reference's own code.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time

import pytest
from reference import _env, reference_tree
from server_support import ServerProcess

pytestmark = [pytest.mark.root, pytest.mark.reference]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 ref@example"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def namespaces():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = f"cs{os.getpid() % 100000}"
    names = {k: f"{tag}{k}" for k in ("srv", "gst", "rtr", "far")}
    try:
        for name in names.values():
            ip("netns", "add", name)
        srv, gst, rtr, far = names["srv"], names["gst"], names["rtr"], names["far"]
        for ns in names.values():
            ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "add", f"{tag}a", "netns", srv, "type", "veth", "peer", "name", "eth0", "netns", gst)
        ip("link", "add", f"{tag}b", "netns", srv, "type", "veth", "peer", "name", "up0", "netns", rtr)
        ip("link", "add", f"{tag}c", "netns", rtr, "type", "veth", "peer", "name", "eth0", "netns", far)
        ip("-n", srv, "addr", "add", "169.254.169.254/32", "dev", "lo")
        ip("-n", srv, "addr", "add", "10.77.0.1/24", "dev", f"{tag}a")
        ip("-n", srv, "addr", "add", "10.79.0.1/24", "dev", f"{tag}b")
        ip("-n", rtr, "addr", "add", "10.79.0.2/24", "dev", "up0")
        ip("-n", rtr, "addr", "add", "10.78.0.1/24", "dev", f"{tag}c")
        ip("-n", gst, "addr", "add", "10.77.0.5/24", "dev", "eth0")
        ip("-n", far, "addr", "add", "10.78.0.5/24", "dev", "eth0")
        for ns, dev in ((srv, f"{tag}a"), (srv, f"{tag}b"), (rtr, "up0"), (rtr, f"{tag}c"), (gst, "eth0"),
                        (far, "eth0")):
            ip("-n", ns, "link", "set", dev, "up")
        ip("-n", gst, "route", "add", "169.254.169.254/32", "via", "10.77.0.1")
        ip("-n", far, "route", "add", "default", "via", "10.78.0.1")
        ip("-n", srv, "route", "add", "10.78.0.0/24", "via", "10.79.0.2")
        ip("-n", rtr, "route", "add", "169.254.169.254/32", "via", "10.79.0.1")
        subprocess.run(["ip", "netns", "exec", rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
        mac = subprocess.run(["ip", "-n", gst, "-j", "link", "show", "eth0"], check=True, capture_output=True,
                             text=True).stdout
        names["gst_mac"] = json.loads(mac)[0]["address"]
        yield names
    finally:
        for name in names.values():
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.fixture(scope="module")
def netns_server(namespaces, db_url, tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("netns-server"))
    proc = ServerProcess(db_url, tmp, ["169.254.169.254:80"], extra=["--rate-limit", "0"],
                         netns=namespaces["srv"])
    yield proc
    proc.stop()


def run_reference_in(ns: str, code: str, tmp: str) -> dict:
    if reference_tree() is None:
        pytest.skip("Debian's cloud-init could not be fetched")
    proc = subprocess.run(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", textwrap.dedent(code), tmp],
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


COMMON = """
import json, sys
from cloudinit import distros, helpers
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
distro = distros.fetch("debian")("debian", {}, paths)
def report(src, ok):
    print(json.dumps({"ok": ok, "metadata": src.metadata, "userdata": (src.userdata_raw or b"").decode()
                      if isinstance(src.userdata_raw, bytes) else src.userdata_raw,
                      "network_config": src.network_config, "keys": src.get_public_ssh_keys(),
                      "instance_id": src.get_instance_id(), "hostname": src.get_hostname().hostname,
                      "network_json": getattr(src, "network_json", None)}, default=str))
"""


def register(server, namespaces, instance_id: str, imds_tokens: str) -> None:
    server.admin("DELETE", "/v1/instances/" + instance_id)
    for other in ("i-ref-openstack", "i-ref-ec2"):
        server.admin("DELETE", "/v1/instances/" + other)
    server.add(instance_id=instance_id, hostname="ref-guest", imds_tokens=imds_tokens,
               addresses=[{"address": "10.77.0.5", "network": "default", "prefix": 24}],
               macs=[namespaces["gst_mac"]], ssh_keys=[{"name": "ref", "data": KEY}],
               user_data="#cloud-config\nruncmd: [echo hi]\n")


def test_reference_openstack_datasource(netns_server, namespaces, tmp_path):
    register(netns_server, namespaces, "i-ref-openstack", "optional")
    result = run_reference_in(namespaces["gst"], COMMON + """
from cloudinit.sources import DataSourceOpenStack as ds
ds.detect_openstack = lambda accept_oracle=False: True
cfg = {"datasource_list": ["OpenStack"], "datasource": {"OpenStack": {"max_wait": 20, "timeout": 5, "retries": 1}}}
src = ds.DataSourceOpenStack(cfg, distro, paths)
report(src, src.get_data())
""", str(tmp_path))
    assert result["ok"] is True
    assert result["instance_id"] == "i-ref-openstack" and result["hostname"] == "ref-guest"
    assert result["metadata"]["uuid"] == "i-ref-openstack" and result["keys"] == [KEY]
    assert result["userdata"] == "#cloud-config\nruncmd: [echo hi]\n"
    assert result["network_json"]["links"][0]["ethernet_mac_address"] == namespaces["gst_mac"]
    config = result["network_config"]
    physical = [c for c in config["config"] if c["type"] == "physical"]
    assert physical[0]["mac_address"] == namespaces["gst_mac"]
    assert physical[0]["subnets"][0]["address"] == "10.77.0.5" and physical[0]["subnets"][0]["type"] == "static"


def test_reference_ec2_datasource_with_imdsv2_required(netns_server, namespaces, tmp_path):
    register(netns_server, namespaces, "i-ref-ec2", "required")
    result = run_reference_in(namespaces["gst"], COMMON + """
from cloudinit.sources import DataSourceEc2 as ds
ds.identify_platform = lambda: ds.CloudNames.AWS
cfg = {"datasource_list": ["Ec2"], "datasource": {"Ec2": {"metadata_urls": ["http://169.254.169.254"],
       "max_wait": 20, "timeout": 5}}}
src = ds.DataSourceEc2(cfg, distro, paths)
ok = src.get_data()
report(src, ok)
""", str(tmp_path))
    assert result["ok"] is True
    assert result["instance_id"] == "i-ref-ec2" and result["metadata"]["local-hostname"] == "ref-guest"
    assert result["keys"] == [KEY]
    assert result["userdata"] == "#cloud-config\nruncmd: [echo hi]\n"
    ethernets = result["network_config"]["ethernets"]
    assert [e["match"]["macaddress"] for e in ethernets.values()] == [namespaces["gst_mac"]]
    deadline = time.monotonic() + 5  # the access log is flushed twice a second
    requests: list = []
    while not requests and time.monotonic() < deadline:
        time.sleep(0.2)
        with open(netns_server.access_log) as handle:
            requests = [json.loads(line) for line in handle if '"i-ref-ec2"' in line]
    assert requests[0]["method"] == "PUT" and requests[0]["path"] == "/latest/api/token"
    assert not [r for r in requests if r["status"] == 401]  # every request carried its token


def curl_in(ns: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, "curl", "-sS", "-m", "3", *args], capture_output=True,
                          text=True, timeout=20)


def test_imdsv2_token_reply_respects_the_hop_limit(netns_server, namespaces):
    netns_server.admin("DELETE", "/v1/instances/i-far")
    netns_server.add(instance_id="i-far", hostname="far", addresses=["10.78.0.5"])
    url = "http://169.254.169.254"
    # one hop away the token arrives; two hops away (through rtr) its IP TTL of 1 runs out
    near = curl_in(namespaces["gst"], "-X", "PUT", "-H", "X-aws-ec2-metadata-token-ttl-seconds: 60",
                   f"{url}/latest/api/token")
    assert near.returncode == 0 and near.stdout
    assert curl_in(namespaces["far"], f"{url}/latest/meta-data/instance-id").stdout == "i-far"
    far = curl_in(namespaces["far"], "-X", "PUT", "-H", "X-aws-ec2-metadata-token-ttl-seconds: 60",
                  f"{url}/latest/api/token")
    assert far.returncode != 0 and not far.stdout


def test_nocloud_seed_url_with_reference(netns_server, namespaces, tmp_path):
    register(netns_server, namespaces, "i-ref-openstack", "optional")
    result = run_reference_in(namespaces["gst"], """
import json, sys
from cloudinit import util
md, ud, vd = util.read_seeded("http://169.254.169.254/nocloud/", timeout=5)
print(json.dumps({"md": md, "ud": ud.decode()}))
""", str(tmp_path))
    assert result["md"]["instance-id"] == "i-ref-openstack" and result["md"]["public-keys"] == [KEY]
    assert result["ud"] == "#cloud-config\nruncmd: [echo hi]\n"

