"""Several hosts, one cloud: Debian's haproxy (``send-proxy-v2``, deploy/haproxy.cfg as shipped) in
front of three ``cloudseed serve`` processes, each in its own network namespace, on one real
PostgreSQL in another; guests in namespaces boot through the balancer (multi_host.py draws it).

Faults (a server killed, PostgreSQL stopped, a server cut off) are test_multi_host_faults.py.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.provider.server.multi_host import METADATA, Deployment, request, running, storm_address
from tests.provider.server.server_support import PYTHON

pytestmark = [pytest.mark.root]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMultiHost guest@example"
USER_DATA = "#cloud-config\nruncmd: [echo through-the-balancer]\n"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    with running(str(tmp_path_factory.mktemp("multi-host"))) as deployment:
        yield deployment


def mac_of(cloud: Deployment, key: str) -> str:
    out = cloud.ns(key).exec("ip", "-j", "link", "show", "eth0").stdout
    return json.loads(out)[0]["address"]


def add(cloud: Deployment, instance_id: str, address: str, **fields) -> None:
    """Register ``instance_id`` at ``address`` (the guests are reused: whoever held it goes).

    Where another instance held the address, every server may still serve it from its cache for up
    to a second (the change feed; its own test is below), or longer on a loaded machine: wait until
    each server answers the new instance, so that a test reads what it set up, not the last holder.
    """
    holders = cloud.admin(1, "GET", f"/v1/instances?address={address}").json()["instances"]
    for holder in holders:
        cloud.admin(1, "DELETE", f"/v1/instances/{holder['instance_id']}")
    cloud.admin(1, "DELETE", f"/v1/instances/{instance_id}")
    body = {"instance_id": instance_id, "hostname": instance_id.replace("i-", ""),
            "addresses": [{"address": address, "network": "default", "prefix": 16}], **fields}
    reply = cloud.admin(1, "POST", "/v1/instances", body)
    assert reply.status == 201, reply.text
    if holders:
        put = request("PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "60"})

        def serves_it(n: int) -> bool:  # with a token: the instance may require IMDSv2
            token = cloud.direct(n, address, put).text
            read = request("GET", "/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": token})
            return cloud.direct(n, address, read).text == instance_id

        deadline = time.monotonic() + 10
        waiting = set(range(1, cloud.count + 1))
        while waiting and time.monotonic() < deadline:
            waiting = {n for n in waiting if not serves_it(n)}
            if waiting:
                time.sleep(0.1)
        assert not waiting, f"servers {sorted(waiting)} still serve the address's last holder after 10 s"


def served_by(cloud: Deployment, instance_id: str) -> list[int]:
    """The servers whose access log names ``instance_id``."""
    time.sleep(0.6)  # access logs are flushed twice a second
    found = []
    for n, server in cloud.servers.items():
        with open(server.access_log) as handle:
            if f'"{instance_id}"' in handle.read():
                found.append(n)
    return found


@pytest.mark.reference
def test_cloud_init_22_4_boots_through_the_balancer(cloud, tmp_path):
    """Debian's cloud-init datasource classes as the clients: OpenStack, and EC2 with IMDSv2 required."""
    from tests.provider.server.reference_netns import COMMON, run_reference_in

    add(cloud, "i-mh-openstack", "10.50.0.11", macs=[mac_of(cloud, "gA")], ssh_keys=[{"name": "k", "data": KEY}],
        user_data=USER_DATA, imds_tokens="optional")
    add(cloud, "i-mh-ec2", "10.50.0.12", macs=[mac_of(cloud, "gB")], ssh_keys=[{"name": "k", "data": KEY}],
        user_data=USER_DATA, imds_tokens="required")
    result = run_reference_in(cloud.ns("gA").name, COMMON + """
from cloudinit.sources import DataSourceOpenStack as ds
ds.detect_openstack = lambda accept_oracle=False: True
cfg = {"datasource_list": ["OpenStack"], "datasource": {"OpenStack": {"max_wait": 20, "timeout": 5, "retries": 1}}}
src = ds.DataSourceOpenStack(cfg, distro, paths)
report(src, src.get_data())
""", str(tmp_path / "os"))
    assert result["ok"] is True and result["instance_id"] == "i-mh-openstack" and result["keys"] == [KEY]
    assert result["userdata"] == USER_DATA
    physical = [c for c in result["network_config"]["config"] if c["type"] == "physical"]
    assert physical[0]["mac_address"] == mac_of(cloud, "gA")
    result = run_reference_in(cloud.ns("gB").name, COMMON + """
from cloudinit.sources import DataSourceEc2 as ds
ds.identify_platform = lambda: ds.CloudNames.AWS
cfg = {"datasource_list": ["Ec2"], "datasource": {"Ec2": {"metadata_urls": ["http://169.254.169.254"],
       "max_wait": 20, "timeout": 5}}}
src = ds.DataSourceEc2(cfg, distro, paths)
report(src, src.get_data())
""", str(tmp_path / "ec2"))
    assert result["ok"] is True and result["instance_id"] == "i-mh-ec2" and result["keys"] == [KEY]
    assert result["userdata"] == USER_DATA
    assert len(served_by(cloud, "i-mh-ec2")) == 1  # balance source: one server per instance


def test_the_agent_boots_through_the_balancer(cloud, tmp_path):
    """cloudseed's own OpenStack and Ec2 (IMDSv2) datasources in the guest namespace."""
    from tests.agent.datasources.netlab import FIND_CODE, write_tree

    add(cloud, "i-mh-agent", "10.50.0.11", ssh_keys=[{"name": "k", "data": KEY}], user_data=USER_DATA,
        availability_zone="zone-9")
    root = tmp_path / "root"
    write_tree(root, {"sys/class/dmi/id/product_name": "OpenStack Nova\n",
                      "sys/class/dmi/id/sys_vendor": "Amazon EC2\n"})
    for names in (["OpenStack"], ["Ec2"]):
        code = (FIND_CODE.replace("ROOT", repr(str(root))).replace("CFG", repr("{}")).replace("STAGE", repr("network"))
                .replace("CMDLINE", repr("")).replace("NAMES", repr(names)))
        proc = cloud.ns("gA").exec(PYTHON, "-c", code, check=False, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["ds"] is not None, proc.stderr[-3000:]
        assert out["ds"]["metadata"]["instance-id"] == "i-mh-agent"
        assert out["ds"]["userdata_raw"] == USER_DATA and KEY in out["ds"]["public_keys"]
        assert out["ds"]["availability_zone"] == "zone-9"
    assert out["imds"] == "v2"


def test_tokens_of_one_server_are_accepted_by_the_others(cloud):
    add(cloud, "i-mh-token", storm_address(9001))
    source = storm_address(9001)
    put = request("PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "300"})
    token = cloud.direct(1, source, put)
    assert token.status == 200 and token.headers["cloudseed-hop-limit"] == "1"
    read = request("GET", "/latest/meta-data/instance-id", {"X-aws-ec2-metadata-token": token.text})
    for n in (1, 2, 3):
        reply = cloud.direct(n, source, read)
        assert (reply.status, reply.text) == (200, "i-mh-token"), n
    # through the balancer: the token outlives its server's removal (maintenance)
    through = cloud.guest("gS", put, source=source).text
    home = served_by(cloud, "i-mh-token")
    try:
        for n in (1, 2, 3):
            cloud.haproxy_command(f"set server cloudseed/s{n} state maint")
            cloud.haproxy_command(f"set server cloudseed_cached/s{n} state maint")
            others = [k for k in (1, 2, 3) if k != n]
            for k in others:
                cloud.haproxy_command(f"set server cloudseed/s{k} state ready")
                cloud.haproxy_command(f"set server cloudseed_cached/s{k} state ready")
            reply = cloud.guest("gS", request("GET", "/latest/meta-data/instance-id",
                                              {"X-aws-ec2-metadata-token": through}), source=source)
            assert (reply.status, reply.text) == (200, "i-mh-token"), f"with s{n} out"
    finally:
        for n in (1, 2, 3):
            cloud.haproxy_command(f"set server cloudseed/s{n} state ready")
            cloud.haproxy_command(f"set server cloudseed_cached/s{n} state ready")
    assert len(served_by(cloud, "i-mh-token")) == 3 and home


def test_rate_limits_hold_per_instance_across_servers(cloud):
    """Per server (100 requests/s, bursts of 300): through the balancer an instance always meets the
    same server, so its limit is the server's; spread over every server (a failover, or a
    balancer without ``balance source``), it is at most servers x burst (the documented bound)."""
    source = storm_address(9002)
    add(cloud, "i-mh-rate", source)
    get = request("GET", "/latest/meta-data/instance-id").replace(b"Connection: close", b"Connection: keep-alive")

    def hammer(send, count: int) -> tuple[int, int, float]:
        sock = send()
        ok = limited = 0
        started = time.monotonic()
        with sock:
            sock.sendall(get * count)
            data = b""
            while data.count(b"HTTP/1.1 ") < count:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                data += chunk
        ok, limited = data.count(b"HTTP/1.1 200"), data.count(b"HTTP/1.1 429")
        return ok, limited, time.monotonic() - started

    ok, limited, took = hammer(lambda: cloud.ns("gS").connect(METADATA, 80, source), 600)
    assert ok + limited == 600 and limited > 0
    assert 300 <= ok <= 300 + 100 * took + 5, (ok, took)
    from cloudseed.provider.server.engine.proxy_protocol import encode_v2

    total, took_all = 0, 0.0
    for n in (1, 2, 3):  # each server, as if the instance had met all three
        def direct(n=n):
            sock = cloud.ns("bal").connect(f"10.40.{n}.2", 80)
            sock.sendall(encode_v2(source, 40000, METADATA, 80))
            return sock
        ok, limited, took = hammer(direct, 400)
        total += ok
        took_all += took
    assert total <= 3 * 300 + 100 * (took_all + 2) + 5, total


def test_an_admin_change_is_served_by_every_server_within_a_second(cloud):
    source = storm_address(9003)
    add(cloud, "i-mh-change", source)
    read = request("GET", "/latest/meta-data/hostname")
    for n in (1, 2, 3):  # every server has the instance cached
        assert cloud.direct(n, source, read).text == "mh-change"
    reply = cloud.admin(2, "PATCH", "/v1/instances/i-mh-change", {"hostname": "renamed"})
    changed = time.monotonic()
    assert reply.status == 200, reply.text
    seen: dict[int, float] = {}
    while len(seen) < 3 and time.monotonic() - changed < 5:
        for n in (1, 2, 3):
            if n not in seen and cloud.direct(n, source, read).text == "renamed":
                seen[n] = time.monotonic() - changed
    assert len(seen) == 3 and max(seen.values()) < 1.0, seen
    assert cloud.guest("gS", read, source=source).text == "renamed"


def test_spoofed_proxy_headers_from_guests_are_refused(cloud):
    from cloudseed.provider.server.engine.proxy_protocol import encode_v1, encode_v2

    victim, attacker = storm_address(9004), storm_address(9005)
    add(cloud, "i-mh-victim", victim, user_data="#cloud-config\npassword: victim-secret\n")
    add(cloud, "i-mh-attacker", attacker)
    refused_before = sum(cloud.metric(n, "cloudseed_proxy_protocol_refused_total") for n in (1, 2, 3))
    for n in (1, 2, 3):  # the servers' PROXY listeners are routable from the guests' LAN here
        for header in (encode_v2(victim, 1, METADATA, 80), encode_v1(victim, 1, METADATA, 80)):
            reply = cloud.guest("gS", header + request("GET", "/latest/user-data"), source=attacker,
                                address=f"10.40.{n}.2")
            assert reply.status == 403 and b"victim" not in reply.body, reply.text
    refused = sum(cloud.metric(n, "cloudseed_proxy_protocol_refused_total") for n in (1, 2, 3))
    assert refused - refused_before == 6
    # through the balancer a PROXY header is only bytes of a malformed request
    reply = cloud.guest("gS", encode_v2(victim, 1, METADATA, 80) + request("GET", "/latest/user-data"),
                        source=attacker)
    assert reply.status == 400 and b"victim" not in reply.body
    # and forwarding headers name nobody
    reply = cloud.guest("gS", request("GET", "/latest/user-data", {"X-Forwarded-For": victim,
                                                                   "X-Instance-ID": "i-mh-victim"}), source=attacker)
    assert reply.status == 404 and b"victim" not in reply.body  # the attacker has no user-data
    reply = cloud.guest("gS", request("PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "60",
                                                                   "X-Forwarded-For": victim}), source=attacker)
    assert reply.status == 403


def test_the_token_hop_limit_holds_behind_the_balancer(cloud):
    """The reply's IP TTL is the instance's hop limit on the balancer's last hop (the Lua action and
    nftables rules of deploy/): one hop from the balancer a token arrives, two hops (through rtr)
    it dies unless the instance's hop limit is 2."""
    add(cloud, "i-mh-near", "10.50.0.11")
    add(cloud, "i-mh-far", "10.51.0.5")
    put = ["-X", "PUT", "-H", "X-aws-ec2-metadata-token-ttl-seconds: 60", f"http://{METADATA}/latest/api/token"]
    curl = ["curl", "-sS", "-m", "3"]
    near = cloud.ns("gA").exec(*curl, *put, check=False)
    assert near.returncode == 0 and near.stdout.startswith("ZWMyL2ktbWgtbmVhc")  # base64 of "ec2/i-mh-near..."
    assert cloud.ns("far").exec(*curl, f"http://{METADATA}/latest/meta-data/instance-id").stdout == "i-mh-far"
    far = cloud.ns("far").exec(*curl, *put, check=False)
    assert far.returncode != 0 and not far.stdout
    # later replies on the same connection are not held to the token's TTL
    both = cloud.ns("far").exec(*curl, f"http://{METADATA}/latest/meta-data/instance-id",
                                f"http://{METADATA}/latest/meta-data/hostname", check=False)
    assert both.stdout == "i-mh-farmh-far"
    assert cloud.admin(1, "PATCH", "/v1/instances/i-mh-far", {"ec2": {"hop_limit": 2}}).status == 200
    time.sleep(1.0)  # every server drops its cached copy within a second
    far = cloud.ns("far").exec(*curl, *put, check=False)
    assert far.returncode == 0 and far.stdout
    token = far.stdout
    reply = cloud.ns("far").exec(*curl, "-H", f"X-aws-ec2-metadata-token: {token}",
                                 f"http://{METADATA}/latest/meta-data/instance-id")
    assert reply.stdout == "i-mh-far"


def test_a_storm_through_the_balancer_reads_only_its_own_data(cloud, tmp_path):
    """300 instances boot at once with cloud-init's OpenStack crawl (a new connection per request);
    every answer naming an instance names the one asking, and the load is spread over the servers."""
    from bench import server_bench, server_storm
    from cloudseed.provider.registry import InstanceRecord, open_registry

    count = 300
    registry = open_registry(cloud.url)
    try:
        registry.add_many([InstanceRecord(instance_id=f"i-mh-storm-{n:04d}", hostname=f"storm-{n}",
                                          addresses=[{"address": storm_address(n), "network": "default"}],
                                          macs=[server_bench.MAC], ssh_keys=[{"name": "k", "data": KEY}],
                                          user_data=b"#cloud-config\n")
                           for n in range(count)])
    finally:
        registry.close()
    sequence = [(m, p, p.endswith(("meta_data.json", "instance-id"))) for m, p in server_bench.OPENSTACK_BOOT]
    cached_before = [cloud.metric(n, "cloudseed_cached_instances") for n in (1, 2, 3)]
    storm = server_storm.boot_storm_c(80, [storm_address(n) for n in range(count)], sequence, False, str(tmp_path),
                                      destination=METADATA, expect=[f"i-mh-storm-{n:04d}" for n in range(count)],
                                      netns=cloud.ns("gS").name, retry_seconds=30)
    assert storm["wrong"] == 0 and storm["failures"] == 0
    assert all(boot[1] is not None and boot[3] == 0 for boot in storm["boots"])
    spread = [cloud.metric(n, "cloudseed_cached_instances") - cached_before[n - 1] for n in (1, 2, 3)]
    assert sum(spread) >= count and min(spread) > count / 10, spread  # consistent hashing spreads them
    print(f"storm through haproxy: {count} instances x {len(sequence)} requests, last done after "
          f"{storm['last_done_s']:.2f}s, p99 {storm['p99_ms']:.1f} ms, failed attempts {len(storm['fails'])}, "
          f"per server {spread}")

