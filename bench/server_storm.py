"""Load clients for bench/server_bench.py that need a source address per instance; run as a
script, the boot storm beside lighttpd:

    .venv/bin/python bench/server_storm.py [--storm 2000] [--rounds 5] [--instances 20000]

serves the boot storm (``--storm`` instances at once, cloud-init 22.4's OpenStack crawl, a new
connection per request) from ``cloudseed serve`` and from lighttpd (one process, its default)
serving instance 0's answers as static files: the same connections and bytes, the same C
client. The two alternate, ``--rounds`` times each, so both see the same machine; each round
of cloudseed uses instances it has not seen (a real storm: one registry read per instance).
Then wrk's keep-alive throughput, alternating the same way. Prints every round (seconds, the
server's CPU seconds, the load average), the medians, the spread of the per-round ratios and
the load. Each round also says where its slowest 1% of instances lost time beside the median
instance (their first answer, the rest of the crawl, their longest connect: a SYN the listen
queue dropped is sent again after 1 s) and the kernel's listen-queue overflow counters; with
``--trace`` the server's side of each new instance's first request too (bench/storm_trace.py:
read by Python, queued for the registry thread, the load, back on the loop); ``--perf DIR``
profiles each round's server; ``--lighttpd-backlog`` sets lighttpd's listen backlog (its default
is 1024, cloudseed's 4096); ``--json`` keeps every round's figures.

wrk cannot bind source addresses. ``boot_storm_c`` runs bench/server_storm_client.c (C, one
epoll loop, built with gcc on first use): a client that costs much less per request than the
server, so its figures are the server's. It drives

* the boot storm: ``count`` instances at once, each making the request sequence cloud-init 22.4
  makes at boot. Its ``url_helper.readurl`` opens a ``requests.Session`` per call and closes it
  after the response (``with session as sess``), so every request is a new TCP connection that
  the client closes (``keep_alive=False`` models exactly that); ``keep_alive=True`` (one
  connection per instance) shows what the server does when clients reuse connections;
* the many-source throughput run: the same client with a long sequence of mixed paths over one
  keep-alive connection per instance address.

``many_sources`` and ``boot_storm`` are the same in Python (asyncio on plain non-blocking
sockets, several processes starting at one shared instant): kept to compare with, they are
limited by the client on a small machine. Times run from the common start to the moment the
last instance finished.
"""

from __future__ import annotations

import asyncio
import errno
import multiprocessing
import os
import socket
import subprocess
import time
from typing import Any, Callable

IP_BIND_ADDRESS_NO_PORT = 24
# what python3-requests 2.28 (Debian 12, cloud-init 22.4) sends besides the cloud-init headers
REQUESTS_HEADERS = "User-Agent: Cloud-Init/22.4\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\n" \
                   "Connection: keep-alive\r\n"


class Connection:
    """One HTTP/1.1 client connection from ``source`` on a non-blocking socket."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket):
        self.loop = loop
        self.sock = sock
        self.buffer = b""

    @classmethod
    async def open(cls, source: str, port: int, attempts: int = 30) -> Connection:
        loop = asyncio.get_running_loop()
        for attempt in range(attempts):  # cloud-init retries refused connections too
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((source, 0))
            try:
                await loop.sock_connect(sock, ("127.0.0.1", port))
                return cls(loop, sock)
            except OSError as error:
                sock.close()
                if attempt == attempts - 1 or error.errno not in (errno.ECONNREFUSED, errno.EAGAIN,
                                                                   errno.ECONNRESET, errno.ETIMEDOUT):
                    raise
                await asyncio.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    async def request(self, method: str, path: str, headers: str = "") -> tuple[int, bytes]:
        await self.loop.sock_sendall(self.sock, f"{method} {path} HTTP/1.1\r\nHost: 169.254.169.254\r\n"
                                                f"{headers}\r\n".encode())
        while b"\r\n\r\n" not in self.buffer:
            chunk = await self.loop.sock_recv(self.sock, 65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buffer += chunk
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        while len(rest) < length:
            chunk = await self.loop.sock_recv(self.sock, 65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            rest += chunk
        self.buffer = rest[length:]
        return int(head.split(b" ", 2)[1]), rest[:length]

    def close(self) -> None:
        self.sock.close()


def _run_processes(processes: int, work: Callable[..., Any], args: list[tuple]) -> tuple[float, list]:
    """Run ``work(start_at, *args[i])`` in a process each (forked), all starting at ``start_at``."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    start_at = time.time() + 1.0 + 0.1 * processes

    def child(index: int) -> None:
        try:
            queue.put((index, work(start_at, *args[index])))
        except BaseException as error:  # report, do not hang the parent
            queue.put((index, error))

    children = [context.Process(target=child, args=(i,)) for i in range(processes)]
    for proc in children:
        proc.start()
    results = [queue.get() for _ in children]
    for proc in children:
        proc.join()
    for _, result in results:
        if isinstance(result, BaseException):
            raise RuntimeError(f"client process failed: {result!r}")
    return start_at, [result for _, result in sorted(results, key=lambda item: item[0])]


def _wait_until(start_at: float) -> None:
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)


# -- many sources, keep-alive, mixed workload ----------------------------------------------
def _mixed_worker(start_at: float, port: int, sources: list[str], paths: list[str], duration: float) -> dict:
    async def main() -> dict:
        connections = [await Connection.open(source, port) for source in sources]
        _wait_until(start_at)
        stop_at = time.monotonic() + duration
        latencies: list[float] = []
        errors = 0

        async def worker(n: int, conn: Connection) -> None:
            nonlocal errors
            i = n
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                status, _ = await conn.request("GET", paths[i % len(paths)])
                latencies.append(time.perf_counter() - started)
                errors += status != 200
                i += 1
            conn.close()

        began = time.monotonic()
        await asyncio.gather(*(worker(n, c) for n, c in enumerate(connections)))
        return {"latencies": latencies, "errors": errors, "elapsed": time.monotonic() - began}

    return asyncio.run(main())


def many_sources(port: int, sources: list[str], paths: list[str], duration: float, processes: int) -> dict:
    slices = [sources[i::processes] for i in range(processes)]
    _, results = _run_processes(processes, _mixed_worker, [(port, s, paths, duration) for s in slices])
    latencies = sorted(x for r in results for x in r["latencies"])
    elapsed = max(r["elapsed"] for r in results)
    return {"rps": len(latencies) / elapsed, "p50_ms": latencies[len(latencies) // 2] * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000, "errors": sum(r["errors"] for r in results),
            "requests": len(latencies), "connections": len(sources), "processes": processes}


# -- boot storm ----------------------------------------------------------------------------
def _storm_worker(start_at: float, port: int, sources: list[str], sequence: list, keep_alive: bool) -> dict:
    async def boot(source: str) -> tuple[float, int, int]:
        token, failures, connections = "", 0, 0
        conn = None
        for method, path in sequence:
            if conn is None:
                conn = await Connection.open(source, port)
                connections += 1
            headers = "X-aws-ec2-metadata-token-ttl-seconds: 21600\r\n" if method == "PUT" else (
                f"X-aws-ec2-metadata-token: {token}\r\n" if token else "")
            status, body = await conn.request(method, path, REQUESTS_HEADERS + headers)
            if not keep_alive:  # readurl: the session (and its connection) is closed after each response
                conn.close()
                conn = None
            if method == "PUT":
                token = body.decode()
            failures += status != 200
        if conn is not None:
            conn.close()
        return time.time(), failures, connections

    async def main() -> list:
        _wait_until(start_at)
        return await asyncio.gather(*(boot(source) for source in sources))

    results = asyncio.run(main())
    return {"finished": [r[0] for r in results], "failures": sum(r[1] for r in results),
            "connections": sum(r[2] for r in results)}


def boot_storm(port: int, sources: list[str], sequence: list, processes: int, keep_alive: bool) -> dict:
    slices = [sources[i::processes] for i in range(processes)]
    start_at, results = _run_processes(processes, _storm_worker,
                                       [(port, s, sequence, keep_alive) for s in slices])
    finished = sorted(t - start_at for r in results for t in r["finished"])
    return {"instances": len(sources), "requests_each": len(sequence), "last_done_s": finished[-1],
            "median_boot_s": finished[len(finished) // 2], "failures": sum(r["failures"] for r in results),
            "connections": sum(r["connections"] for r in results), "processes": processes,
            "keep_alive": keep_alive, "cpus": os.cpu_count()}


# -- boot storm with the C client (bench/server_storm_client.c) -------------------------------
def build_c_client(tmp: str) -> str:
    binary = os.path.join(tmp, "server_storm_client")
    if not os.path.exists(binary):
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server_storm_client.c")
        subprocess.run(["gcc", "-O2", "-o", binary, source], check=True)
    return binary


def boot_storm_c(port: int, sources: list[str], sequence: list, keep_alive: bool, tmp: str,
                 destination: str = "127.0.0.1", retry_seconds: float = 0, expect: list[str] | None = None,
                 offsets: list[float] | None = None, netns: str | None = None, start_in: float = 0.5,
                 start_at: float | None = None) -> dict:
    """``boot_storm`` with the C client (one process): the client is not the limit.

    ``destination``: the server's address; ``retry_seconds`` > 0: failed requests are retried as
    the agent does, for that long per instance; ``expect``: per instance, a text every step marked
    ``check`` (a third element ``True`` in ``sequence``) must answer; ``offsets``: per instance,
    seconds after the common start it begins; ``netns``: run the client in that network namespace;
    ``start_at``: the common start (epoch seconds; default ``start_in`` from now).
    The result adds per-instance ``boots`` (start, finish or None, failed attempts, failed steps,
    wrong answers), ``timings`` (per instance: ``first`` answer's time, ``connect_max`` and
    ``slow_connects``: its longest connect and how many took over 0.5 s, ``latency_max``: its longest
    request) and ``fails`` (time, status) of every failed attempt."""
    binary = build_c_client(tmp)
    steps = os.path.join(tmp, "sequence.txt")
    with open(steps, "w") as handle:
        handle.writelines(f"{step[0]} {step[1]}{' check' if len(step) > 2 and step[2] else ''}\n"
                          for step in sequence)
    listing = os.path.join(tmp, "sources.txt")
    with open(listing, "w") as handle:
        for n, source in enumerate(sources):
            fields = [source, expect[n] if expect else "-", f"{offsets[n]:.3f}" if offsets else "0"]
            handle.write(" ".join(fields) + "\n")
    start_at = start_at or time.time() + start_in
    command = [binary, str(port), "1" if keep_alive else "0", steps, listing, f"{start_at:.6f}", destination,
               str(retry_seconds)]
    if netns:
        command = ["ip", "netns", "exec", netns] + command
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(command, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"storm client failed with status {proc.returncode}: {proc.stderr}")
    boots, timings, fails, fields = [], [], [], {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "fail":
            fails.append((float(parts[1]), int(parts[2])))
        elif parts[0] == "failures":
            fields = dict(zip(parts[::2], parts[1::2]))
        else:
            finish = float(parts[0])
            boots.append((float(parts[1]), finish if finish >= 0 else None, int(parts[2]), int(parts[3]),
                          int(parts[4])))
            timings.append({"first": float(parts[5]), "connect_max": float(parts[6]), "slow_connects": int(parts[7]),
                            "latency_max": float(parts[8])})
    finished = sorted(boot[1] for boot in boots if boot[1] is not None)
    last = finished[-1] if finished else float("nan")
    return {"instances": len(sources), "requests_each": len(sequence), "last_done_s": last,
            "median_boot_s": finished[len(finished) // 2] if finished else float("nan"),
            "failures": int(fields["failures"]), "wrong": int(fields["wrong"]),
            "connections": int(fields["connections"]), "requests": int(fields["requests"]),
            "p50_ms": float(fields["p50_ms"]), "p99_ms": float(fields["p99_ms"]), "keep_alive": keep_alive,
            "rps": int(fields["requests"]) / last if finished else 0.0, "boots": boots, "timings": timings,
            "fails": fails, "sources": list(sources),
            "start_at": start_at,
            "client_cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}


# -- as a script: the storm beside lighttpd -------------------------------------------------------
TCP_COUNTERS = ("ListenOverflows", "ListenDrops", "TCPReqQFullDoCookies", "TCPReqQFullDrop", "SyncookiesSent",
                "RetransSegs")


def tcp_counters() -> dict[str, int]:
    """The kernel's TCP counters that show a listener's queues overflowing (this network namespace)."""
    values: dict[str, int] = {}
    for name in ("/proc/net/netstat", "/proc/net/snmp"):
        with open(name) as handle:
            lines = handle.read().splitlines()
        for header, numbers in zip(lines[::2], lines[1::2]):
            values.update(zip(header.split()[1:], (int(n) for n in numbers.split()[1:])))
    return {key: values.get(key, 0) for key in TCP_COUNTERS}


def tail(result: dict, trace: dict[str, dict] | None = None, share: float = 0.01) -> dict:
    """Where the last ``share`` of the instances (by finish) spent their time, beside the median
    instance: the first answer (the registry read), the rest of the crawl, the longest connect.
    With ``trace`` (bench/storm_trace.py's records by peer) the first request's stages too."""
    import statistics

    start_at = result["start_at"]
    rows = [(boot[1], timing, source) for boot, timing, source in zip(result["boots"], result["timings"],
                                                                       result["sources"]) if boot[1] is not None]
    rows.sort(key=lambda row: row[0])
    last = rows[-max(1, int(len(rows) * share)):]

    def describe(group: list) -> dict:
        median = statistics.median
        out = {"finish": median(r[0] for r in group), "first": median(r[1]["first"] for r in group),
               "after_first": median(r[0] - r[1]["first"] for r in group),
               "connect_max": max(r[1]["connect_max"] for r in group),
               "slow_connects": sum(r[1]["slow_connects"] for r in group),
               "latency_max": max(r[1]["latency_max"] for r in group)}
        traced = [trace[r[2]] for r in group if trace and r[2] in trace and "answered" in trace[r[2]]]
        if traced:
            out.update({"asked": median(t["asked"] - start_at for t in traced),
                        "queued": median(t.get("began", t["asked"]) - t["asked"] for t in traced),
                        "load": median(t.get("ended", 0) - t.get("began", 0) for t in traced),
                        "landed": median(t.get("landed", t["answered"]) - t.get("ended", t["asked"]) for t in traced),
                        "answered": median(t["answered"] - start_at for t in traced)})
        return out

    middle = len(rows) // 2
    return {"tail": describe(last), "median": describe(rows[middle - len(last) // 2: middle + len(last) // 2 + 1]),
            "slow_connects": sum(r[1]["slow_connects"] for r in rows)}


def _tail_text(name: str, group: dict) -> str:
    text = (f"{name}: done {group['finish']:.2f}s, first answer {group['first']:.2f}s, "
            f"then {group['after_first']:.2f}s; longest connect {group['connect_max'] * 1000:.0f} ms, "
            f"request {group['latency_max'] * 1000:.0f} ms")
    if "asked" in group:
        text += (f"; first request read by Python at {group['asked']:.2f}s, queued {group['queued'] * 1000:.0f} ms, "
                 f"load {group['load'] * 1000:.1f} ms, to the loop {group['landed'] * 1000:.0f} ms, "
                 f"answered {group['answered']:.2f}s")
    return text


def _alternating(rounds: int, run: Callable[[str, int], dict]) -> dict[str, list[dict]]:
    """``run(side, round)`` for both sides, ``rounds`` times, alternating which goes first."""
    results: dict[str, list[dict]] = {"cloudseed": [], "lighttpd": []}
    for index in range(rounds):
        for side in (("cloudseed", "lighttpd") if index % 2 == 0 else ("lighttpd", "cloudseed")):
            results[side].append(run(side, index))
    return results


def _summary(name: str, results: dict[str, list[dict]], key: str, higher_is_better: bool) -> None:
    import statistics

    ratios = sorted(ours[key] / theirs[key] for ours, theirs in zip(results["cloudseed"], results["lighttpd"]))
    ours = statistics.median(r[key] for r in results["cloudseed"])
    theirs = statistics.median(r[key] for r in results["lighttpd"])
    loads = [r["load"] for side in results.values() for r in side]
    print(f"{name}: cloudseed median {ours:.3f}, lighttpd median {theirs:.3f}: cloudseed/lighttpd "
          f"{ours / theirs:.2f} (per round {ratios[0]:.2f} to {ratios[-1]:.2f}; "
          f"{'higher' if higher_is_better else 'lower'} is better for cloudseed); load {min(loads):.1f} to "
          f"{max(loads):.1f}", flush=True)


def main() -> int:
    import argparse
    import json
    import shutil
    import signal
    import sys
    import tempfile

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import server_bench

    parser = argparse.ArgumentParser(description="the boot storm, cloudseed beside lighttpd, alternating")
    parser.add_argument("--storm", type=int, default=2000, help="instances booting at once")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--instances", type=int, default=0, help="registered (default: storm x rounds)")
    parser.add_argument("--duration", type=int, default=5, help="seconds of each wrk run (0: no wrk)")
    parser.add_argument("--tree", default=server_bench.ROOT, help="run the server from this source tree")
    parser.add_argument("--lighttpd-backlog", type=int, default=0,
                        help="lighttpd's listen backlog (default: its own, 1024; cloudseed listens with 4096)")
    parser.add_argument("--trace", action="store_true",
                        help="time each new instance's registry load in the server (bench/storm_trace.py)")
    parser.add_argument("--json", help="write every round's figures (and the tails) to this file")
    parser.add_argument("--perf", help="profile each storm round's server with perf (record -g) into this "
                                       "directory, and count its context switches and page faults (perf stat); "
                                       "the profiler costs time: not for quoted figures")
    args = parser.parse_args()
    instances = max(args.instances, args.storm * args.rounds + 1)
    tmp = tempfile.mkdtemp(prefix="cloudseed-storm-")
    server = lighttpd = None
    try:
        db = os.path.join(tmp, "server.db")
        print(f"registering {instances} instances: {server_bench.populate(db, instances):.1f}s", flush=True)
        port, static_port = server_bench.free_port(), server_bench.free_port()
        trace_file = os.path.join(tmp, "trace.jsonl")
        launcher = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "storm_trace.py"),
                    trace_file] if args.trace else [sys.executable, "-m", "cloudseed"]
        server = subprocess.Popen(launcher + ["serve", "--db", db, "--listen",
                                   f"127.0.0.1:{port}", "--access-log", "", "--rate-limit", "0"], cwd=args.tree,
                                  stderr=subprocess.DEVNULL,
                                  env=dict(os.environ, PYTHONPATH=os.path.abspath(args.tree)))
        server_bench.wait_port(port)
        sequence = server_bench.OPENSTACK_BOOT
        paths = sorted({path for _, path in sequence})
        # lighttpd answers a directory's index at DIR/ (and redirects DIR): the one listing asked
        # without a slash (/openstack) is asked with one there; the bodies are the same
        static = [(m, p + "/" if p == "/openstack" else p) for m, p in sequence]
        docroot = os.path.join(tmp, "static")
        server_bench.static_tree(docroot, port, [p + "/" if p == "/openstack" else p for p in paths])
        lighttpd = server_bench.start_lighttpd(docroot, static_port, tmp, args.lighttpd_backlog)
        pids = {"cloudseed": server.pid, "lighttpd": lighttpd.pid}
        rounds: list[dict] = []
        print(f"boot storm: {args.storm} instances x {len(sequence)} requests, a new connection each "
              f"(cloud-init 22.4's OpenStack crawl), C client; {os.cpu_count()} CPUs", flush=True)

        def storm(side: str, index: int) -> dict:
            sources = [server_bench.address_of(1 + index * args.storm + n) for n in range(args.storm)]
            work = os.path.join(tmp, f"{side}-{index}")
            os.makedirs(work)
            shutil.copy(build_c_client(tmp), work)
            profilers = []
            if args.perf:
                os.makedirs(args.perf, exist_ok=True)
                name = os.path.join(args.perf, f"{side}-{index + 1}")
                profilers = [subprocess.Popen(["perf", "record", "-q", "-g", "-F", "2000", "-p", str(pids[side]), "-o",
                                               name + ".data"], stderr=subprocess.DEVNULL),
                             subprocess.Popen(["perf", "stat", "-x,", "-o", name + ".stat", "-e",
                                               "task-clock,context-switches,page-faults", "-p", str(pids[side])],
                                              stderr=subprocess.DEVNULL)]
                time.sleep(0.5)
            before, counters = server_bench.process_cpu(pids[side]), tcp_counters()
            result = boot_storm_c(port if side == "cloudseed" else static_port, sources,
                                  sequence if side == "cloudseed" else static, False, work)
            for profiler in profilers:
                profiler.send_signal(signal.SIGINT)
                profiler.wait()
            if profilers:
                with open(os.path.join(args.perf, f"{side}-{index + 1}.stat")) as handle:
                    print("    perf stat: " + "; ".join(",".join(line.split(",")[:3]) for line in handle
                                                         if line.strip() and not line.startswith("#")), flush=True)
            result["cpu"] = server_bench.process_cpu(pids[side]) - before
            result["load"] = os.getloadavg()[0]
            result["tcp"] = {key: value - counters[key] for key, value in tcp_counters().items()}
            result["side"], result["round"] = side, index + 1
            print(f"  {side:9s} round {index + 1}: last instance done after {result['last_done_s']:.2f}s "
                  f"(median {result['median_boot_s']:.2f}s), server CPU {result['cpu']:.2f}s, client CPU "
                  f"{result['client_cpu']:.2f}s, failures {result['failures']}, load {result['load']:.1f}", flush=True)
            where = tail(result)
            print(f"    {_tail_text('last 1%', where['tail'])}\n    {_tail_text('median', where['median'])}\n"
                  f"    connects over 0.5 s: {where['slow_connects']}; TCP: "
                  + ", ".join(f"{key} {value}" for key, value in result["tcp"].items() if value), flush=True)
            rounds.append(result)
            if result["failures"]:
                raise RuntimeError(f"{side}: {result['failures']} failed requests")
            return result

        _summary("boot storm, time until the last instance is done", _alternating(args.rounds, storm),
                 "last_done_s", False)
        if args.duration:
            def keep_alive(side: str, index: int) -> dict:
                result = server_bench.run_wrk(port if side == "cloudseed" else static_port, tmp, args.duration, 50,
                                              server_bench.MIXED)
                result["load"] = os.getloadavg()[0]
                print(f"  {side:9s} round {index + 1}: wrk {result['rps']:.0f} req/s, p99 {result['p99_ms']:.2f} ms, "
                      f"load {result['load']:.1f}", flush=True)
                return result

            docroot_mixed = os.path.join(tmp, "static")
            server_bench.static_tree(docroot_mixed, port, server_bench.MIXED)
            _summary("keep-alive throughput (wrk, 50 connections, mixed paths), requests/s",
                     _alternating(args.rounds, keep_alive), "rps", True)
        server.send_signal(signal.SIGTERM)
        server.wait()
        if args.trace:
            with open(trace_file) as handle:
                trace = {entry["peer"]: entry for entry in map(json.loads, handle)}
            for result in rounds:
                if result["side"] == "cloudseed":
                    where = tail(result, trace)
                    print(f"  traced round {result['round']}:\n    {_tail_text('last 1%', where['tail'])}\n"
                          f"    {_tail_text('median', where['median'])}", flush=True)
                    result["traced"] = where
        if args.json:
            with open(args.json, "w") as handle:
                json.dump([{key: value for key, value in result.items()
                            if key not in ("boots", "timings", "fails", "sources")} | {"where": tail(result)}
                           for result in rounds], handle, indent=1)
    finally:
        for proc in (server, lighttpd):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
