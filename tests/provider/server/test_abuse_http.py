"""The server under abuse at the HTTP layer (issue 16, items 2 and 3), on loopback, bounded in time.

A real ``cloudseed serve`` with small bounds in its settings; each test replays one attack and
checks that the server's memory, descriptors and disk stay bounded and that a normal instance
is still answered while the attack goes on.
"""

from __future__ import annotations

import os
import resource
import socket
import time

import pytest

from tests.provider.server.server_support import ServerProcess, http, new_address, rss_kib

SETTINGS = {"rate_limit": 0, "head_timeout": 1.0, "idle_timeout": 30, "max_connections_per_source": 64,
            "access_log_max_bytes": 256 * 1024, "access_log_backups": 1}
FLOOD_PATH = b"GET /openstack/latest/meta_data.json HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("abuse-http")
    proc = ServerProcess(str(tmp / "server.db"), str(tmp / "run"), ["127.0.0.1:0"], config=SETTINGS)
    yield proc
    proc.stop()


def register(server: ServerProcess, name: str) -> str:
    address = new_address()
    server.add(instance_id=f"i-{name}", hostname=name, addresses=[{"address": address, "network": "n"}],
               user_data="#cloud-config\n" + "# padding\n" * 50)
    return address


def served(server: ServerProcess, address: str, seconds: float = 2.0) -> float:
    """Time one normal request from ``address`` takes; fails unless it is answered 200 in time."""
    started = time.monotonic()
    reply = http(server.port, "/openstack/latest/meta_data.json", source=address)
    took = time.monotonic() - started
    assert reply.status == 200 and took < seconds, (reply.status, took)
    return took


def test_pipelining_flood_that_never_reads_keeps_memory_bounded(server):
    flooder, normal = register(server, "flooder"), register(server, "normal")
    served(server, normal)  # warm: the instance is cached
    base = rss_kib(server.proc.pid)
    socks = []
    for _ in range(16):
        sock = socket.socket()
        sock.bind((flooder, 0))
        sock.connect(("127.0.0.1", server.port))
        sock.setblocking(False)
        socks.append(sock)
    burst = FLOOD_PATH * 500
    sent = peak = 0
    latencies = []
    deadline = time.monotonic() + 6.0
    try:
        while time.monotonic() < deadline:
            for sock in socks:
                try:
                    sent += sock.send(burst)
                except (BlockingIOError, InterruptedError):
                    pass
            peak = max(peak, rss_kib(server.proc.pid))
            if len(latencies) < 30:
                latencies.append(served(server, normal))
            time.sleep(0.02)
    finally:
        for sock in socks:
            sock.close()
    assert sent > 5_000_000, f"only {sent} bytes flooded: the test did not push the server"
    growth_mib = (peak - base) / 1024
    assert growth_mib < 32, f"server memory grew by {growth_mib:.0f} MiB under the flood"  # before: 120 MiB in 10 s
    assert max(latencies) < 2.0
    served(server, normal)


def test_idle_connections_from_one_source_do_not_lock_out_others(server):
    normal = register(server, "bystander")
    with open(f"/proc/{server.proc.pid}/limits") as handle:
        limits = handle.read()
    soft, hard = next(line.split()[3:5] for line in limits.splitlines() if line.startswith("Max open files"))
    assert soft == hard, f"the server left its open-file limit at {soft} (hard {hard})"
    own = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(own[1], 8192), own[1]))
    hog = new_address()  # not registered
    socks = []
    try:
        for _ in range(1100):
            sock = socket.socket()
            sock.bind((hog, 0))
            sock.connect(("127.0.0.1", server.port))
            socks.append(sock)
        served(server, normal)
        time.sleep(0.3)
        refused = 0
        for sock in socks:
            sock.settimeout(0.01)
            try:
                if sock.recv(200).startswith(b"HTTP/1.1 503"):
                    refused += 1
            except (TimeoutError, socket.timeout, ConnectionError):
                pass
        assert refused >= 1100 - 64, f"only {refused} of 1100 connections from one address were refused"
        served(server, normal)
        metrics = server.admin("GET", "/metrics", token=None).text
        assert "cloudseed_connections_refused_total" in metrics
    finally:
        for sock in socks:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, own)


def test_slowloris_head_is_closed_after_the_deadline_idle_keep_alive_is_not(server):
    normal = register(server, "patient")
    slow = socket.create_connection(("127.0.0.1", server.port), source_address=(normal, 0))
    idle = socket.create_connection(("127.0.0.1", server.port), source_address=(normal, 0))
    try:
        idle.sendall(b"GET /latest/meta-data/hostname HTTP/1.1\r\nHost: x\r\n\r\n")
        assert idle.recv(4096).endswith(b"patient")
        slow.sendall(b"GET /latest/meta-data/hostname HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        closed_after = None
        while time.monotonic() - started < 5.0:
            try:
                slow.sendall(b"X")  # a byte at a time, never the end of the head
                slow.settimeout(0.25)
                if slow.recv(100) == b"":
                    closed_after = time.monotonic() - started
                    break
            except (TimeoutError, socket.timeout):
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed_after = time.monotonic() - started
                break
        assert closed_after is not None, "a head sent a byte at a time was never cut off"
        assert 0.9 <= closed_after <= 3.0, closed_after
        # the idle keep-alive connection (no request begun) outlived the head deadline
        idle.sendall(b"GET /latest/meta-data/hostname HTTP/1.1\r\nHost: x\r\n\r\n")
        idle.settimeout(2)
        assert idle.recv(4096).endswith(b"patient")
    finally:
        slow.close()
        idle.close()


def test_access_log_is_bounded(server):
    address = register(server, "chatty")
    limit = SETTINGS["access_log_max_bytes"]
    with socket.create_connection(("127.0.0.1", server.port), source_address=(address, 0)) as sock:
        request = b"GET /latest/meta-data/hostname HTTP/1.1\r\nHost: x\r\n\r\n"
        for _ in range(30):  # 6,000 requests: about 4x the limit in log lines
            sock.sendall(request * 200)
            received = 0
            while received < 200:
                received += sock.recv(65536).count(b"HTTP/1.1 200")
    time.sleep(1.2)  # flushed twice a second
    log = server.access_log
    assert os.path.exists(log + ".1"), "the access log was never rotated"
    assert not os.path.exists(log + ".2")
    for path in (log, log + ".1"):
        size = os.path.getsize(path)
        assert size < limit + 256 * 1024, f"{path} is {size} bytes"  # one flush past the limit at most
    assert oct(os.stat(log).st_mode & 0o777) in ("0o640", "0o600")
