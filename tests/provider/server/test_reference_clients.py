"""Debian's cloud-init 22.4 as a real client, in network namespaces where 169.254.169.254 is us.

Topology (``router_namespaces``, built by reference_netns.py): ``srv`` runs ``cloudseed serve`` on 169.254.169.254:80;
``gst`` (10.77.0.5) is wired to it directly; ``far`` (10.78.0.5) reaches it through the router
namespace ``rtr``, two hops away, which is what the IMDSv2 hop limit is about.
The reference's datasource classes run inside ``gst`` with their platform checks patched:
``detect_openstack`` (DMI) returns True, and DataSourceEc2's ``identify_platform`` says AWS so
that it uses IMDSv2 tokens, as on EC2. Everything else is the reference's own code.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.provider.server.reference_netns import COMMON, curl_in, run_reference_in
from tests.provider.server.server_support import ServerProcess

pytestmark = [pytest.mark.root, pytest.mark.reference]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 ref@example"


@pytest.fixture(scope="module")
def netns_server(router_namespaces, db_url, tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("netns-server"))
    proc = ServerProcess(db_url, tmp, ["169.254.169.254:80"], extra=["--rate-limit", "0"],
                         netns=router_namespaces["srv"])
    yield proc
    proc.stop()


def register(server, router_namespaces, instance_id: str, imds_tokens: str) -> None:
    server.admin("DELETE", "/v1/instances/" + instance_id)
    for other in ("i-ref-openstack", "i-ref-ec2"):
        server.admin("DELETE", "/v1/instances/" + other)
    server.add(instance_id=instance_id, hostname="ref-guest", imds_tokens=imds_tokens,
               addresses=[{"address": "10.77.0.5", "network": "default", "prefix": 24}],
               macs=[router_namespaces["gst_mac"]], ssh_keys=[{"name": "ref", "data": KEY}],
               user_data="#cloud-config\nruncmd: [echo hi]\n")


def test_reference_openstack_datasource(netns_server, router_namespaces, tmp_path):
    register(netns_server, router_namespaces, "i-ref-openstack", "optional")
    result = run_reference_in(router_namespaces["gst"], COMMON + """
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
    assert result["network_json"]["links"][0]["ethernet_mac_address"] == router_namespaces["gst_mac"]
    config = result["network_config"]
    physical = [c for c in config["config"] if c["type"] == "physical"]
    assert physical[0]["mac_address"] == router_namespaces["gst_mac"]
    assert physical[0]["subnets"][0]["address"] == "10.77.0.5" and physical[0]["subnets"][0]["type"] == "static"


def test_reference_ec2_datasource_with_imdsv2_required(netns_server, router_namespaces, tmp_path):
    register(netns_server, router_namespaces, "i-ref-ec2", "required")
    result = run_reference_in(router_namespaces["gst"], COMMON + """
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
    assert [e["match"]["macaddress"] for e in ethernets.values()] == [router_namespaces["gst_mac"]]
    deadline = time.monotonic() + 5  # the access log is flushed twice a second
    requests: list = []
    while not requests and time.monotonic() < deadline:
        time.sleep(0.2)
        with open(netns_server.access_log) as handle:
            requests = [json.loads(line) for line in handle if '"i-ref-ec2"' in line]
    assert requests[0]["method"] == "PUT" and requests[0]["path"] == "/latest/api/token"
    assert not [r for r in requests if r["status"] == 401]  # every request carried its token


def test_imdsv2_token_reply_respects_the_hop_limit(netns_server, router_namespaces):
    netns_server.admin("DELETE", "/v1/instances/i-far")
    netns_server.add(instance_id="i-far", hostname="far", addresses=["10.78.0.5"])
    url = "http://169.254.169.254"
    # one hop away the token arrives; two hops away (through rtr) its IP TTL of 1 runs out
    near = curl_in(router_namespaces["gst"], "-X", "PUT", "-H", "X-aws-ec2-metadata-token-ttl-seconds: 60",
                   f"{url}/latest/api/token")
    assert near.returncode == 0 and near.stdout
    assert curl_in(router_namespaces["far"], f"{url}/latest/meta-data/instance-id").stdout == "i-far"
    far = curl_in(router_namespaces["far"], "-X", "PUT", "-H", "X-aws-ec2-metadata-token-ttl-seconds: 60",
                  f"{url}/latest/api/token")
    assert far.returncode != 0 and not far.stdout


def test_nocloud_seed_url_with_reference(netns_server, router_namespaces, tmp_path):
    register(netns_server, router_namespaces, "i-ref-openstack", "optional")
    result = run_reference_in(router_namespaces["gst"], """
import json, sys
from cloudinit import util
md, ud, vd = util.read_seeded("http://169.254.169.254/nocloud/", timeout=5)
print(json.dumps({"md": md, "ud": ud.decode()}))
""", str(tmp_path))
    assert result["md"]["instance-id"] == "i-ref-openstack" and result["md"]["public-keys"] == [KEY]
    assert result["ud"] == "#cloud-config\nruncmd: [echo hi]\n"

