"""Per-path caches are bounded: a flood of distinct paths and queries leaves the server's memory flat.

A real ``cloudseed serve``; one instance asks 10,002 distinct 4 KB targets, 1,667 of each kind
(missing GCE paths, found GCE leaves with distinct queries, the same for Azure, EC2 and Oracle
paths that are not there), and the server's resident memory must stay within 10% of what it was
before the flood. The resident size swings by up to 8 MB (about 20%) between readings with
nothing kept (measured: 33-42 MB over eight rounds of the same flood, no trend), the allocator's
slack coming and going; what the server keeps is the floor under that. So the server's RSS is
read after every 100 requests, and the lowest reading over the last third of the flood is
compared with the lowest over a warm-up flood of the same kinds (1,000 of each). Before the
caches were bounded, GCE and Azure kept every answer, 404s included: tens of MB, floor included.
"""

from __future__ import annotations

import http.client
import re

import pytest

from tests.provider.server.server_support import ServerProcess

FILLER = "p" * 4000
KINDS = [
    (lambda i: f"/computeMetadata/v1/instance/{FILLER}{i}", {"Metadata-Flavor": "Google"}, 404),
    (lambda i: f"/computeMetadata/v1/instance/id?x={FILLER}{i}", {"Metadata-Flavor": "Google"}, 200),
    (lambda i: f"/metadata/instance/compute/{FILLER}{i}?api-version=2021-08-01", {"Metadata": "true"}, 404),
    (lambda i: f"/metadata/instance/compute?api-version=2021-08-01&x={FILLER}{i}", {"Metadata": "true"}, 200),
    (lambda i: f"/latest/meta-data/{FILLER}{i}", {}, 404),
    (lambda i: f"/opc/v1/instance/{FILLER}{i}", {}, 404),
]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return int(re.search(r"VmRSS:\s+(\d+)", handle.read()).group(1))


def flood(port: int, start: int, count: int, pid: int) -> list[int]:
    """Ask ``count`` targets of each kind; the server's RSS after every 100 requests."""
    readings = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for make, headers, status in KINDS:
            for i in range(start, start + count):
                conn.request("GET", make(i), headers=headers)
                response = conn.getresponse()
                response.read()
                assert response.status == status, make(i)[:80]
                if i % 100 == 99:
                    readings.append(rss_kib(pid))
    finally:
        conn.close()
    return readings


@pytest.fixture(scope="module")
def lone_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bounded")
    proc = ServerProcess(str(tmp / "db"), str(tmp / "srv"), ["127.0.0.1:0"],
                         config={"rate_limit": 0, "access_log": ""})
    proc.add(instance_id="4711", hostname="flood", addresses=[{"address": "127.0.0.1", "network": "default"}])
    yield proc
    proc.stop()


def test_ten_thousand_distinct_targets_leave_memory_flat(lone_server):
    pid = lone_server.proc.pid
    flood(lone_server.port, 0, 300, pid)  # first answers, first arenas
    before = min(flood(lone_server.port, 1000, 1000, pid))
    readings = flood(lone_server.port, 10**6, 1667, pid)
    after = min(readings[-len(readings) // 3:])
    assert after <= before * 1.10, f"RSS floor grew from {before} KiB to {after} KiB ({readings})"
