"""Soak of the metadata server: normal boots while it is abused, the normal clients' p99 and its peak memory.

    .venv/bin/python bench/server_soak.py [--instances 2000] [--duration 60] [--storm 200]

A real ``cloudseed serve`` (one process, production bounds from its defaults) on loopback, with
``--instances`` registered. For ``--duration`` seconds, all at once:

* a pipelining flood: 16 connections from one registered instance that send requests and never
  read an answer;
* idle connections: 1,000 connections from one unregistered address that send nothing;
* slowloris: 50 connections trickling a request head one byte a second;
* hostile requests: garbage IMDSv2 tokens and unregistered source addresses, in a loop;
* normal boots, round after round: ``--storm`` instances each making the request sequence
  Debian's cloud-init 22.4 makes at boot (bench/server_bench.py's OPENSTACK_BOOT), one new
  connection per request, through the C client (bench/server_storm_client.c).

Printed: boots done and failed, the normal clients' p50/p99 (worst round and all rounds), the
server's peak resident memory (VmHWM) and open descriptors, and the load average. Bounded in
time; traffic only to 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

import server_bench  # noqa: E402
import server_storm  # noqa: E402

FLOOD = b"GET /openstack/latest/meta_data.json HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n"


def proc_status(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def connect(port: int, source: str) -> socket.socket | None:
    sock = socket.socket()
    try:
        sock.bind((source, 0))
        sock.settimeout(2)
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        return sock
    except OSError:
        sock.close()
        return None


class Abuse:
    """The attacks, each in its own thread, until ``stop`` is set."""

    def __init__(self, port: int, flooder: str, stop: threading.Event):
        self.port, self.flooder, self.stop = port, flooder, stop
        self.sockets: list[socket.socket] = []
        self.counts = {"flood_bytes": 0, "idle": 0, "slowloris_still_open": 0, "hostile": 0}
        self.threads = [threading.Thread(target=t, daemon=True) for t in
                        (self.flood, self.idle, self.slowloris, self.hostile)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=10)
        for sock in self.sockets:
            sock.close()

    def flood(self) -> None:
        socks = [s for s in (connect(self.port, self.flooder) for _ in range(16)) if s]
        self.sockets += socks
        burst = FLOOD * 64
        while not self.stop.is_set():
            for sock in socks:
                try:
                    self.counts["flood_bytes"] += sock.send(burst)
                except (BlockingIOError, OSError):
                    pass
            time.sleep(0.01)

    def idle(self) -> None:
        for _ in range(1000):
            if self.stop.is_set():
                return
            sock = connect(self.port, "127.250.0.1")
            if sock:
                self.sockets.append(sock)
                self.counts["idle"] += 1

    def slowloris(self) -> None:
        socks = [s for s in (connect(self.port, "127.250.0.2") for _ in range(50)) if s]
        self.sockets += socks
        head = b"GET /openstack/latest/meta_data.json HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 4096
        position = 0
        while not self.stop.is_set() and position < len(head):
            for sock in list(socks):
                try:
                    sock.send(head[position:position + 1])
                except OSError:
                    socks.remove(sock)
            self.counts["slowloris_still_open"] = len(socks)
            position += 1
            self.stop.wait(1.0)

    def hostile(self) -> None:
        requests = [
            b"GET /latest/meta-data/ HTTP/1.1\r\nHost: x\r\nX-aws-ec2-metadata-token: AAAA.bbbb\r\n\r\n",
            b"GET /openstack/latest/user_data HTTP/1.1\r\nHost: x\r\nX-Instance-ID: i-00000001\r\n\r\n",
            b"PUT /latest/api/token HTTP/1.1\r\nHost: x\r\nX-aws-ec2-metadata-token-ttl-seconds: 99999999\r\n\r\n",
            b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n",
        ]
        index = 0
        while not self.stop.is_set():
            source = f"127.251.{index % 250}.{index // 250 % 250 + 1}"
            sock = connect(self.port, source)
            if sock:
                try:
                    sock.setblocking(True)
                    sock.sendall(requests[index % len(requests)])
                    sock.recv(4096)
                except OSError:
                    pass
                sock.close()
                self.counts["hostile"] += 1
            index += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--storm", type=int, default=200, help="instances booting at once in each round")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))   # the attacks hold ~1,100 sockets
    tmp = tempfile.mkdtemp(prefix="cloudseed-soak-")
    server = None
    try:
        db = os.path.join(tmp, "server.db")
        print(f"registering {args.instances} instances: {server_bench.populate(db, args.instances):.1f}s", flush=True)
        port = server_bench.free_port()
        server = subprocess.Popen([sys.executable, "-m", "cloudseed", "serve", "--db", db, "--listen",
                                   f"127.0.0.1:{port}", "--access-log", os.path.join(tmp, "access.log")],
                                  cwd=ROOT, stderr=subprocess.DEVNULL)
        server_bench.wait_port(port)
        time.sleep(1.0)
        base_rss = proc_status(server.pid, "VmRSS")
        stop = threading.Event()
        abuse = Abuse(port, server_bench.address_of(0), stop)
        abuse.start()
        started, rounds, peak_fds = time.monotonic(), [], 0
        step = max(1, (args.instances - 1) // args.storm)
        while time.monotonic() - started < args.duration:
            sources = [server_bench.address_of(1 + n * step) for n in range(args.storm)]
            rounds.append(server_storm.boot_storm_c(port, sources, server_bench.OPENSTACK_BOOT, False, tmp))
            peak_fds = max(peak_fds, open_fds(server.pid))
        stop.set()
        abuse.join()
        peak = proc_status(server.pid, "VmHWM")
        boots = sum(r["instances"] for r in rounds)
        failures = sum(r["failures"] for r in rounds)
        worst = max(rounds, key=lambda r: r["p99_ms"])
        print(f"soak {args.duration}s, {len(rounds)} rounds of {args.storm} boots ({len(server_bench.OPENSTACK_BOOT)} "
              f"requests each, new connection per request) under abuse {abuse.counts}:")
        print(f"  boots {boots}, failed requests {failures}; normal clients p50 "
              f"{sorted(r['p50_ms'] for r in rounds)[len(rounds) // 2]:.2f} ms, p99 median round "
              f"{sorted(r['p99_ms'] for r in rounds)[len(rounds) // 2]:.2f} ms, worst round {worst['p99_ms']:.2f} ms; "
              f"slowest boot {max(r['last_done_s'] for r in rounds):.2f}s")
        print(f"  server memory: {base_rss // 1024} MiB before, peak {peak // 1024} MiB (VmHWM); "
              f"peak open descriptors {peak_fds}; load {os.getloadavg()[0]:.1f}")
        return 0 if failures == 0 else 1
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
