"""Server CPU per request: a load-independent cost measure for ``cloudseed serve``.

    .venv/bin/python bench/server_cpu.py [--instances 100000] [--requests 200000] [--profile FILE]

Wall-clock throughput on a shared machine depends on what else runs; CPU seconds the server
process spends per answered request barely do. This starts one ``cloudseed serve`` over a
registry of ``--instances`` instances, warms it, then for each workload reads the server's
utime+stime from ``/proc/PID/stat`` before and after a client sends a counted number of
requests, and prints microseconds of server CPU per request:

* ``wrk-mixed``: wrk, keep-alive, the benchmark's mixed OpenStack/EC2 paths from one address;
* ``sources-mixed``: the same paths over keep-alive connections from many instance addresses
  (a pipelining asyncio client, so the client is rarely the limit);
* ``new-conn``: one request per connection from many addresses (cloud-init's ``readurl``);
* ``storm``: instances the server has not seen, each making cloud-init 22.4's whole OpenStack
  crawl (37 requests, a new connection each; bench/server_storm_client.c): what a boot storm
  costs per connection, registry reads and rendering each instance's answers included;
  ``storm-again``: the same instances again (a reboot storm: everything cached).

Each workload runs ``--repeat`` times; the lowest figure is the least disturbed one. CPU time
still moves with what the other core runs (shared caches, frequency); ``--callgrind`` instead
runs the server under valgrind's callgrind and counts the instructions (user space only, no
kernel) it executes for the same requests: slow, but the same on a busy or a quiet machine.

``--profile FILE`` runs the server under cProfile and writes its stats to FILE (CPU figures
are then inflated by the profiler; use them for where the time goes, not how much).
``--tree DIR`` runs the server from another checkout (``git archive REV cloudseed | tar -x``),
to measure before and after a change in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

import server_bench  # noqa: E402
import server_storm  # noqa: E402
from server_bench import MIXED, address_of, connect_from, free_port, populate, wait_port  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, kernel_only: bool = False) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    if kernel_only:
        return int(fields[12]) / TICK
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)


def cached_db(instances: int) -> str:
    """A registry with ``instances`` instances, reused across runs (populating 100k takes a while)."""
    path = os.path.join(tempfile.gettempdir(), f"cloudseed-bench-{instances}.db")
    if not os.path.exists(path + ".done"):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.unlink(path + suffix)
        print(f"registering {instances} instances: {populate(path, instances):.1f}s", flush=True)
        open(path + ".done", "w").close()
    return path


def wrk_requests(port: int, seconds: int, connections: int, tmp: str) -> int:
    script = os.path.join(tmp, "mixed.lua")
    with open(script, "w") as handle:
        handle.write("paths = {" + ", ".join(f'"{p}"' for p in MIXED) + "}\ni = 0\n"
                     "request = function()\n  i = i % #paths + 1\n  return wrk.format('GET', paths[i])\nend\n")
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", script,
                          f"http://127.0.0.1:{port}/"], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(out)
    return int(re.search(r"(\d+) requests in", out).group(1))


async def keepalive_sources(port: int, first: int, count: int, per_connection: int, depth: int = 8) -> int:
    """``count`` connections from instance addresses, each pipelining ``per_connection`` requests."""

    async def one(n: int) -> int:
        reader, writer = await connect_from(address_of(first + n), port)
        done = 0
        while done < per_connection:
            batch = min(depth, per_connection - done)
            writer.write(b"".join(f"GET {MIXED[(done + k) % len(MIXED)]} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
                                  for k in range(batch)))
            for _ in range(batch):
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(head.decode())
                length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
                await reader.readexactly(length)
            done += batch
        writer.close()
        return done

    results = []
    for start in range(0, count, 200):  # 200 connections at a time
        results += await asyncio.gather(*(one(n) for n in range(start, min(count, start + 200))))
    return sum(results)


async def new_connections(port: int, first: int, count: int, repeat: int) -> int:
    async def one(n: int) -> int:
        for k in range(repeat):
            reader, writer = await connect_from(address_of(first + n), port)
            writer.write(f"GET {MIXED[(n + k) % len(MIXED)]} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                         .encode())
            data = await reader.read()
            writer.close()
            if not data.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(data[:200].decode())
        return repeat

    results = []
    for start in range(0, count, 200):
        results += await asyncio.gather(*(one(n) for n in range(start, min(count, start + 200))))
    return sum(results)


def callgrind_instructions(pid: int, tmp: str) -> int:
    """Instructions callgrind counted in ``pid`` since the last zeroing (dumps, then reads the dump;
    the dump stays in ``tmp`` for callgrind_annotate, and with --keep its path is printed)."""
    before = set(os.listdir(tmp))
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    for _ in range(600):
        new = [f for f in set(os.listdir(tmp)) - before if f.startswith("callgrind.out")]
        if new:
            time.sleep(0.5)
            if os.environ.get("CLOUDSEED_KEEP_CALLGRIND"):
                print(f"  (callgrind dump: {os.path.join(tmp, new[0])})", flush=True)
            with open(os.path.join(tmp, new[0])) as handle:
                for line in handle:
                    if line.startswith("summary:") or line.startswith("totals:"):
                        return int(line.split()[1])
        time.sleep(0.1)
    raise RuntimeError("no callgrind dump")


def measure(pid: int, label: str, run, repeat: int, callgrind: str = "") -> float:
    figures = []
    for _ in range(repeat):
        if callgrind:
            subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
        before, kernel, wall = cpu_seconds(pid), cpu_seconds(pid, True), time.monotonic()
        requests = run()
        cpu, wall = cpu_seconds(pid) - before, time.monotonic() - wall
        kernel = cpu_seconds(pid, True) - kernel
        if callgrind:
            figures.append(callgrind_instructions(pid, callgrind) / requests)
            print(f"  {label:14s} {requests:8d} requests  {figures[-1]:9.0f} instructions/request "
                  f"(callgrind, user space)", flush=True)
            continue
        figures.append(cpu / requests * 1e6)
        print(f"  {label:14s} {requests:8d} requests  server CPU {cpu:6.2f}s  = {figures[-1]:6.1f} us/request "
              f"({kernel / requests * 1e6:.1f} in the kernel; wall {wall:5.1f}s, load {os.getloadavg()[0]:.1f})",
              flush=True)
    if repeat > 1:
        print(f"  {label:14s} lowest {min(figures):.1f}", flush=True)
    return min(figures)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=100_000)
    parser.add_argument("--seconds", type=int, default=8, help="wrk duration")
    parser.add_argument("--sources", type=int, default=2000, help="instance addresses for the asyncio clients")
    parser.add_argument("--per-source", type=int, default=40, help="keep-alive requests per address")
    parser.add_argument("--access-log", action="store_true", help="access log on (to a file)")
    parser.add_argument("--profile", metavar="FILE", help="run the server under cProfile, stats to FILE")
    parser.add_argument("--only", choices=("wrk-mixed", "sources-ka", "sources-mixed", "new-conn", "storm"),
                        action="append")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lighttpd", action="store_true", help="also lighttpd's CPU per request (wrk-mixed)")
    parser.add_argument("--callgrind", action="store_true", help="count instructions under callgrind")
    parser.add_argument("--tree", default=ROOT, help="source tree to run the server from")
    args = parser.parse_args()
    db = cached_db(args.instances)
    tmp = tempfile.mkdtemp(prefix="cloudseed-cpu-")
    port = free_port()
    command = [sys.executable]
    if args.callgrind:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/callgrind.out.%p.%n"] + command
    if args.profile:
        command += ["-m", "cProfile", "-o", args.profile]
    settings = os.path.join(tmp, "server.yaml")
    with open(settings, "w") as handle:  # under callgrind a registry read may take seconds
        with open(os.path.join(args.tree, "cloudseed/provider/server/config.py")) as source:
            knows = "registry_wait" in source.read()  # an older tree (--tree) may not have the setting
        handle.write("registry_wait: 600\n" if args.callgrind and knows else "{}\n")
    command += ["-m", "cloudseed", "serve", "--db", db, "--listen", f"127.0.0.1:{port}", "--rate-limit", "0",
                "--config", settings,
                "--access-log", os.path.join(tmp, "access.log") if args.access_log else ""]
    env = dict(os.environ, PYTHONPATH=os.path.abspath(args.tree))
    server = subprocess.Popen(command, cwd=args.tree, stderr=subprocess.DEVNULL, env=env)
    only = set(args.only or ("wrk-mixed", "sources-ka", "sources-mixed", "new-conn", "storm"))
    repeat = args.repeat
    grind = tmp if args.callgrind else ""
    if args.callgrind:  # about 50 times slower: fewer requests
        args.seconds, args.sources, args.per_source = min(args.seconds, 5), min(args.sources, 200), 20
    try:
        for _ in range(1200 if args.callgrind else 1):
            try:
                wait_port(port)
                break
            except RuntimeError:
                continue
        print(f"server CPU per request, {args.instances} instances registered, access log "
              f"{'on' if args.access_log else 'off'}{', under cProfile' if args.profile else ''}:")
        # warm: identify the addresses the keep-alive and new-connection runs use (registry reads)
        n = args.sources
        asyncio.run(keepalive_sources(port, 0, n, len(MIXED)))
        asyncio.run(keepalive_sources(port, n, n, len(MIXED)))
        if "wrk-mixed" in only:
            measure(server.pid, "wrk-mixed", lambda: wrk_requests(port, args.seconds, 50, tmp), repeat, grind)
        if args.lighttpd:
            static_port = free_port()
            server_bench.static_tree(os.path.join(tmp, "static"), port)
            lighttpd = server_bench.start_lighttpd(os.path.join(tmp, "static"), static_port, tmp)
            try:
                measure(lighttpd.pid, "lighttpd-wrk", lambda: wrk_requests(static_port, args.seconds, 50, tmp),
                        repeat)
            finally:
                lighttpd.send_signal(signal.SIGTERM)
                lighttpd.wait()
        if "sources-ka" in only:
            measure(server.pid, "sources-ka",
                    lambda: asyncio.run(keepalive_sources(port, 0, n, args.per_source, depth=1)), repeat, grind)
        if "sources-mixed" in only:
            measure(server.pid, "sources-mixed",
                    lambda: asyncio.run(keepalive_sources(port, 0, n, args.per_source)), repeat, grind)
        if "new-conn" in only:
            measure(server.pid, "new-conn", lambda: asyncio.run(new_connections(port, n, n, 5)), repeat, grind)
        if "storm" in only:  # fresh instances each round, from the far end of the registry
            size = 100 if args.callgrind else 1000
            rounds = iter(range(args.instances - size, 2 * n, -size))

            def storm(first: int) -> int:
                work = tempfile.mkdtemp(dir=tmp)
                result = server_storm.boot_storm_c(port, [address_of(first + k) for k in range(size)],
                                                   server_bench.OPENSTACK_BOOT, False, work)
                if result["failures"]:
                    raise RuntimeError(f"storm: {result['failures']} failures")
                return result["connections"]

            firsts: list[int] = []
            measure(server.pid, "storm", lambda: storm(firsts.append(next(rounds)) or firsts[-1]), repeat, grind)
            again = iter(firsts)
            measure(server.pid, "storm-again", lambda: storm(next(again)), repeat, grind)
        cold = args.instances - 2 * n
        if cold > 0 and "sources-mixed" in only:
            count = min(cold // repeat, 2000)
            firsts = iter(range(2 * n, args.instances, count))
            measure(server.pid, "cold-identify",
                    lambda: asyncio.run(keepalive_sources(port, next(firsts), count, 1)), repeat, grind)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()
        if not os.environ.get("CLOUDSEED_KEEP_CALLGRIND"):  # the dumps' folder is printed to be read after
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
