"""A new instance's answers are the same bytes however (and in whatever order) they are built.

The server builds an instance's OpenStack and EC2 answers when they are first asked for and keeps
them (``MetadataApp``, ``apis/ec2.py``, ``apis/openstack.py``); how it builds them is tuned for a
boot storm's first crawls. For a set of varied records this asks, in process, every path of
cloud-init's OpenStack and EC2 crawls, every path the EC2 listings lead to in a sample of API
versions, every OpenStack file of every version, and paths that do not exist, in four orders
(crawl order, leaves before their listings, reversed, listings only then leaves), and compares:

* each answer (status, content type, bytes) with the per-path renderers called on their own
  with nothing cached (``ec2.render``/``openstack.render`` with fresh trees), the same for every
  order;
* each record's whole answer set with a digest recorded before the first crawl's rendering was
  reorganised (``first_crawl_answers.json``, written by running this file as a script on the
  tree whose answers are the reference; a deliberate change of an answer rewrites it).

Time-dependent leaves (temporary credentials, their ``info`` documents' ``LastUpdated``, the
identity signatures) and ``meta_data.json``'s fresh ``random_seed`` are masked.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from typing import Any, Callable

import pytest

from bench.server_bench import EC2_BOOT, OPENSTACK_BOOT
from cloudseed.provider.instance_data import ec2 as ec2_data
from cloudseed.provider.instance_data.versions import OPENSTACK_FILES, OPENSTACK_VERSIONS
from cloudseed.provider.registry import InstanceRecord, open_registry
from cloudseed.provider.server.apis import ec2 as ec2_api
from cloudseed.provider.server.apis import openstack as openstack_api
from cloudseed.provider.server.config import ServerConfig
from cloudseed.provider.server.engine.http import REASONS, Request, Response
from cloudseed.provider.server.engine.transport import Listener
from cloudseed.provider.server.imds_tokens import TokenIssuer
from cloudseed.provider.server.instance_cache import CachedInstance, InstanceCache
from cloudseed.provider.server.metadata_app import MetadataApp
from cloudseed.provider.server.metrics import Metrics
from cloudseed.provider.server.rate_limit import RateLimiter

GOLDEN = os.path.join(os.path.dirname(__file__), "first_crawl_answers.json")
EC2_SAMPLE = ("1.0", "2007-12-15", "2009-04-04", "2011-01-01", "2016-06-30", "2016-09-02", "2018-08-17",
              "2019-10-01", "2020-10-27", "2021-03-23", "latest")
LIVE = ("/iam/info", "identity-credentials/ec2/info", "instance-identity/pkcs7", "instance-identity/signature",
        "instance-identity/rsa2048")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 crawl@example"
CREATED = "2026-11-27T12:00:00Z"


def records() -> list[InstanceRecord]:
    """Records that exercise the trees' branches: NICs, public and IPv6 addresses, tags, spot,
    events, placement, product codes, given network_data, vendor data forms, no user data."""
    def record(index: int, **fields: Any) -> InstanceRecord:
        fields.setdefault("addresses", [{"address": f"10.{index}.0.5", "network": f"net-{index}"}])
        return InstanceRecord(instance_id=f"i-crawl-{index}", created_at=CREATED, **fields)

    return [
        record(0, hostname="plain", macs=["52:54:00:00:00:01"], ssh_keys=[{"name": "k", "data": KEY}],
               user_data=b"#cloud-config\nruncmd: [echo hello]\n", vendor_data={"cloud-init": "#cloud-config\n"},
               ec2={"iam_role": "bench-role"}),
        record(1, hostname="bare"),  # no MAC, no key, no user data, no vendor data
        record(2, hostname="two-nics", availability_zone="eu-west-1b", project_id="123456",
               macs=["52:54:00:00:02:01", "52:54:00:00:02:02"],
               addresses=[{"address": "10.2.0.5", "network": "a", "prefix": 24, "mac": "52:54:00:00:02:01"},
                          {"address": "203.0.113.9", "network": "a", "public": True, "mac": "52:54:00:00:02:01"},
                          {"address": "2001:db8::5", "network": "a", "prefix": 64, "mac": "52:54:00:00:02:01"},
                          {"address": "10.3.0.7", "network": "b", "prefix": 20, "mac": "52:54:00:00:02:02"}],
               ssh_keys=[{"name": "a", "data": KEY}, {"name": "b", "data": KEY + "2"}],
               vendor_data="#cloud-config\n", vendor_data2={"cloud-init": "#!/bin/sh\n"},
               tags={"env": "test", "team": "core"}, meta={"role": "db"}, launch_index=3,
               ec2={"iam_role": "r2", "security_groups": ["web", "ssh"], "placement_group": "pg",
                    "partition_number": 2, "host_id": "h-1", "product_codes": ["pc1", "pc2"],
                    "life_cycle": "spot", "spot": {"action": "stop", "time": "2026-12-01T10:00:00Z"},
                    "rebalance": {"notice_time": "2026-12-01T09:00:00Z"},
                    "events": [{"code": "system-reboot", "description": "reboot", "state": "active",
                                "not_before": "2026-12-02T00:00:00Z", "not_after": "2026-12-02T02:00:00Z",
                                "id": "instance-event-1"},
                               {"code": "instance-stop", "description": "done", "state": "completed",
                                "not_before": "2026-11-02T00:00:00Z", "id": "instance-event-0"}],
                    "target_lifecycle_state": "InService", "instance_metadata_tags": "enabled"}),
        record(3, hostname="given-net", macs=["52:54:00:00:03:01"],
               network_data={"links": [{"id": "l0", "type": "phy", "ethernet_mac_address": "52:54:00:00:03:01"}],
                             "networks": [{"id": "n0", "link": "l0", "type": "ipv4_dhcp"}]},
               gateway=[], nameservers=["192.0.2.53"], tags={"hidden": "x"},
               ec2={"instance_metadata_tags": "disabled", "account_id": "000000000042", "vpc_cidr": "10.0.0.0/8",
                    "subnet_ids": {"net-3": "subnet-given"}, "availability_zone_id": "use1-az9"}),
        record(4, hostname="v6-only", availability_zone="cn-north-1a", macs=["52:54:00:00:04:01"],
               addresses=[{"address": "2001:db8:4::9", "network": "v6", "prefix": 120}], user_data=b"\x00\xffbinary",
               vendor_data=[1, 2, 3], ec2={"security_group_ids": ["sg-1"], "vpc_id": "vpc-given",
                                           "instance_action": "stop"}),
        record(5, hostname="project", project_id="a-long-project-name-not-digits", instance_type="m5.large",
               ami_id="ami-12345678", ssh_keys=[{"name": "only", "data": KEY}], user_data=b"",
               addresses=[{"address": "10.5.0.5", "network": "net-5", "prefix": 31}]),
    ]


class App:
    """A metadata application over ``registry`` whose cache holds each record (as its first load)."""

    def __init__(self, registry: Any):
        cache = InstanceCache(registry, None, 60)  # type: ignore[arg-type]  # loads made here, in line
        self.app = MetadataApp(ServerConfig(db=":memory:"), registry, cache, TokenIssuer(b"k" * 32),
                               RateLimiter(0, 0), Metrics())
        self.cache = cache
        self.listener = Listener("127.0.0.1", 0, None)

    def load(self, record: InstanceRecord) -> str:
        peer = record.addresses[0]["address"]
        ids, loaded = self.cache._load_addresses([(None, peer)])[(None, peer)]
        assert ids == [record.instance_id] and loaded is not None
        self.cache.addresses[(None, peer)] = ids[0]
        self.cache.instances[ids[0]] = CachedInstance(*loaded)
        return peer

    def get(self, peer: str, path: str) -> Response:
        request = Request("GET", path, "HTTP/1.1", {"host": "169.254.169.254"}, b"", peer, self.listener, path)
        answer = self.app.handle(request)
        assert answer.__class__ is Response, (path, answer)
        return answer  # type: ignore[return-value]


def reference(app: App, record: InstanceRecord, path: str) -> tuple[int, str, bytes]:
    """The answer the per-path renderers give with nothing cached (fresh trees every time)."""
    if path.startswith("/openstack"):
        parts = [p for p in path[len("/openstack"):].split("/") if p]
        if not parts:
            return _seen(openstack_api.versions_listing())
        version = openstack_api.resolve_version(parts[0])
        if version is None or len(parts) > 2:
            return 404, "", b""
        rendered = openstack_api.render(record, version, parts[1] if len(parts) == 2 else "")
    else:
        _, version, *rest = path.split("/", 2)
        resolved = ec2_api.resolve_version(version)
        if resolved is None:
            return 404, "", b""
        rendered = ec2_api.render(record, resolved, rest[0] if rest else "", "", {}, app.app._ec2_live, ())
    if rendered is None:
        return 404, "", b""
    return _seen(rendered if rendered.__class__ is Response else rendered())


def _seen(response: Response, path: str = "") -> tuple[int, str, bytes]:
    body = response.body
    if path.endswith("meta_data.json") and response.status == 200:
        doc = json.loads(body)
        if "random_seed" in doc:
            doc["random_seed"] = "(fresh)"
            body = json.dumps(doc).encode()
    if response.status == 200 and (path.endswith(LIVE) or path.rstrip("/").rsplit("/", 2)[-2:-1] == [
            "security-credentials"]):  # a role's or the instance's temporary credentials
        body = b"(live)"
    return response.status, response.content_type if response.status == 200 else "", \
        body if response.status == 200 else b""


def crawl_paths(get: Callable[[str], Response], record: InstanceRecord) -> list[str]:
    """Every path the crawls ask, each path the EC2 listings lead to in the sample versions
    (with and without a directory's slash), every OpenStack file, and some that do not exist."""
    paths = [p for _, p in OPENSTACK_BOOT + EC2_BOOT if not p.endswith("/api/token")]
    for version in EC2_SAMPLE:
        paths += [f"/{version}", f"/{version}/", f"/{version}/user-data", f"/{version}/meta-data/nope",
                  f"/{version}/meta-data/hostname/x", f"/{version}/dynamic/instance-identity/document"]
        todo = [f"/{version}/meta-data/"]
        while todo:
            directory = todo.pop()
            paths += [directory, directory.rstrip("/")]
            answer = get(directory)
            assert answer.status == 200, directory
            for line in answer.body.decode().splitlines():
                name = line.split("=", 1)[0] if directory.endswith("/public-keys/") else line
                (todo if name.endswith("/") else paths).append(directory + name)
    for version in (*OPENSTACK_VERSIONS, "latest", "1999-01-01"):
        paths += [f"/openstack/{version}", f"/openstack/{version}/"]
        paths += [f"/openstack/{version}/{name}" for name in (*OPENSTACK_FILES, "nope") if name != "password"]
    paths += ["/openstack", "/openstack/", "/1999-01-01/meta-data/", "/latest/meta-data/network/interfaces/macs/x/"]
    return list(dict.fromkeys(paths))


def answers_in_order(registry: Any, record: InstanceRecord, order: list[str]) -> dict[str, tuple]:
    app = App(registry)
    peer = app.load(record)
    return {path: _seen(app.get(peer, path), path) for path in order}


def digest(answers: dict[str, tuple]) -> str:
    total = hashlib.sha256()
    for path in sorted(answers):
        status, content_type, body = answers[path]
        total.update(f"{path}\0{status}\0{content_type}\0{len(body)}\0".encode() + body)
    return total.hexdigest()


def orders(paths: list[str]) -> dict[str, list[str]]:
    listings = [p for p in paths if p.endswith("/")]
    return {"crawl": paths, "leaves first": sorted(paths, key=lambda p: (p.endswith("/"), -len(p))),
            "reversed": paths[::-1], "listings then the rest": listings + [p for p in paths if p not in listings],
            "shuffled": random.Random(7).sample(paths, len(paths))}


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    registry = open_registry(str(tmp_path_factory.mktemp("crawl") / "registry.db"))
    for record in records():
        registry.add(record)
    yield registry
    registry.close()


@pytest.mark.parametrize("index", range(len(records())))
def test_every_answer_is_the_same_whatever_order_builds_it(registry, index):
    record = registry.get(records()[index].instance_id)
    probe = App(registry)
    peer = probe.load(record)
    paths = crawl_paths(lambda path: probe.get(peer, path), record)
    assert len(paths) > 150
    expected = {path: _seen_reference(probe, record, path) for path in paths}
    for name, order in orders(paths).items():
        got = answers_in_order(registry, record, order)
        differ = [p for p in paths if got[p] != expected[p]]
        assert not differ, f"{record.instance_id}, {name} order: {len(differ)} answers differ, first {differ[:5]}"
    with open(GOLDEN) as handle:
        golden = json.load(handle)
    assert digest(expected) == golden[record.instance_id], \
        f"{record.instance_id}: the answers are not the ones recorded in first_crawl_answers.json"


def test_ipv4_blocks_in_integers_are_the_ipaddress_texts():
    """``ipv4_blocks`` works the subnet and VPC blocks out in integers for plain addresses: the
    same texts as ``ipaddress`` for every prefix, and ``ipaddress``'s own answer (or error) for
    anything else."""
    chooser = random.Random(11)
    record = InstanceRecord(instance_id="i-blocks")
    cases = [(f"{chooser.randrange(256)}.{chooser.randrange(256)}.{chooser.randrange(256)}.{chooser.randrange(256)}",
              chooser.choice([None, *range(33)])) for _ in range(3000)]
    cases += [("0.0.0.0", 0), ("255.255.255.255", 32), ("10.0.0.5", None), ("10.0.0.5", 16), ("10.0.0.5", 17),
              ("010.0.0.5", 24), ("10.0.0.5 ", 24), ("10.0.0.5", "24"), ("10.0.0.5", True), ("10.1", 24)]
    for address, prefix in cases:
        entry = {"address": address, "network": "n", **({"prefix": prefix} if prefix is not None else {})}
        try:
            network = ec2_data._subnet(entry)
            expected: Any = (str(network), ec2_data.vpc_cidr(record, network))
        except ValueError as error:
            expected = type(error)
        try:
            got: Any = ec2_data.ipv4_blocks(record, entry)
        except ValueError as error:
            got = type(error)
        assert got == expected, (address, prefix)


def test_heads_made_from_a_shared_start_are_the_ones_composed_line_by_line():
    for status in (200, 404, 429, 299):
        for content_type in ("text/plain", "application/json", "application/octet-stream"):
            for body in (b"", b"x", b"\xff" * 70000):
                response = Response(status, body, content_type)
                lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}", f"Content-Type: {content_type}",
                         f"Content-Length: {len(body)}", "Server: cloudseed"]
                expected = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
                assert response.encode(True) == expected + body
                assert response.encode(True, head_only=True) == expected
                assert response.encode(False) == expected[:-2] + b"Connection: close\r\n\r\n" + body
                with_header = Response(status, body, content_type, headers=[("Retry-After", "1")])
                assert with_header.encode(True) == expected[:-2] + b"Retry-After: 1\r\n\r\n" + body


def _seen_reference(app: App, record: InstanceRecord, path: str) -> tuple:
    status, content_type, body = reference(app, record, path)
    if status != 200:
        return status, "", b""
    return _seen(Response(status, body, content_type), path)


def write_golden(path: str) -> None:
    """Record every record's answer digest (run on the tree whose answers are the reference)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        registry = open_registry(os.path.join(tmp, "registry.db"))
        golden = {}
        for record in records():
            registry.add(record)
            stored = registry.get(record.instance_id)
            app = App(registry)
            peer = app.load(stored)
            paths = crawl_paths(lambda p: app.get(peer, p), stored)  # noqa: B023
            golden[record.instance_id] = digest(answers_in_order(registry, stored, paths))
        registry.close()
    with open(path, "w") as handle:
        json.dump(golden, handle, indent=1, sort_keys=True)
        handle.write("\n")


if __name__ == "__main__":
    write_golden(sys.argv[1] if len(sys.argv) > 1 else GOLDEN)
