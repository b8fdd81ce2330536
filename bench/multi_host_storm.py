"""A boot storm through the balancer, and the scale model it checks (docs/metadata-server.md, "Scale").

    .venv/bin/python bench/multi_host_storm.py [--instances 10000] [--window 60] [--calibrate 1000] [--servers 3]

Builds the tested deployment (tests/provider/server/multi_host.py: haproxy with deploy/haproxy.cfg
in front of ``--servers`` ``cloudseed serve`` hosts, PostgreSQL, each in its network namespace;
needs root) and registers the instances. Then:

1. Calibration: ``--calibrate`` instances boot at once (cloud-init 22.4's OpenStack crawl, a new
   connection per request, bench/server_storm_client.c in the guests' namespace). The CPU each
   part spent (the servers, haproxy, PostgreSQL and its backends, the client), PostgreSQL's
   statements (``pg_stat_database.xact_commit``: every registry statement is its own
   transaction) and the servers' memory give the per-boot costs.
2. The model: from those costs, the cores of servers, balancer and database for 10,000 and
   100,000 instances booting within 5 minutes (at 50% utilisation), the servers' memory for the
   instances they cache and the database's size (``pg_total_relation_size`` per instance); and
   the predicted duration of the big storm on this machine (all its CPU work over its cores).
3. The big storm: ``--instances`` starting evenly over ``--window`` seconds (0: all at once); the
   measured CPU per boot, the machine's utilisation and the boot durations beside the
   prediction (utilisation under 1: every boot takes about what it took alone), every instance
   checked to read only its own data. Failed attempts are counted by status (0: no answer).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)  # run as a script: the tests package (the multi-host lab) of this checkout

import server_bench  # noqa: E402
import server_storm  # noqa: E402

from cloudseed.provider.registry import InstanceRecord, open_registry  # noqa: E402
from tests.provider.server.multi_host import METADATA, running, storm_address  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIScale bench@example"
WINDOW = 300.0  # "booting within 5 minutes"
UTILISATION = 0.5  # plan for half the cores busy


def postmaster_pid(cloud) -> int:
    with open(os.path.join(cloud.pg.data, "postmaster.pid")) as handle:
        return int(handle.readline())


def statements(cloud) -> int:
    import psycopg

    with psycopg.connect(cloud.url, autocommit=True) as conn:
        return int(conn.execute("SELECT SUM(xact_commit) FROM pg_stat_database").fetchone()[0])


def database_bytes(cloud) -> int:
    import psycopg

    with psycopg.connect(cloud.url, autocommit=True) as conn:
        return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def answered_503(cloud) -> int:
    """503s the servers answered (the registry away or too slow), from their /metrics."""
    import re

    total = 0
    for n in cloud.servers:
        text = cloud.admin(n, "GET", "/metrics").text
        total += sum(int(float(v)) for v in re.findall(r'^cloudseed_requests_total\{[^}]*status="503"[^}]*\} (\S+)$',
                                                         text, re.M))
    return total


def health_changes(cloud, offset: int) -> tuple[int, list[str]]:
    """haproxy's log from ``offset``: its length now and the servers' state changes since."""
    with open(cloud.haproxy_log.name, errors="replace") as handle:
        handle.seek(offset)
        text = handle.read()
    return offset + len(text.encode()), [line.strip() for line in text.splitlines() if " is DOWN" in line
                                        or " is UP" in line]


def storm(cloud, first: int, count: int, tmp: str, sequence: list, window: float = 0.0) -> dict:
    """``count`` instances from ``first`` boot, starting evenly over ``window`` seconds; the result
    with each part's CPU seconds."""
    pids = {f"server {n}": proc.proc.pid for n, proc in cloud.servers.items()}
    pids["haproxy"] = cloud.haproxy.pid
    pids["postgresql"] = postmaster_pid(cloud)
    before = {name: server_bench.process_cpu(pid) for name, pid in pids.items()}
    queries = statements(cloud)
    refused = answered_503(cloud)
    cloud.haproxy_log.flush()
    log_at, _ = health_changes(cloud, 0)
    work = tempfile.mkdtemp(dir=tmp)
    result = server_storm.boot_storm_c(80, [storm_address(first + n) for n in range(count)], sequence, False, work,
                                       destination=METADATA, retry_seconds=120,
                                       expect=[f"i-scale-{first + n:06d}" for n in range(count)],
                                       netns=cloud.ns("gS").name,
                                       offsets=[n * window / count for n in range(count)] if window else None)
    result["cpu"] = {name: server_bench.process_cpu(pid) - before[name] for name, pid in pids.items()}
    result["cpu"]["client"] = result["client_cpu"]
    result["statements"] = statements(cloud) - queries - 2  # the two reads of the counter
    result["load"] = os.getloadavg()[0]
    result["servers_503"] = answered_503(cloud) - refused
    _, changes = health_changes(cloud, log_at)
    result["health"] = changes
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description="a boot storm through haproxy, and the scale model")
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--window", type=float, default=60.0, help="seconds over which the instances start")
    parser.add_argument("--calibrate", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=3, choices=(1, 2, 3))
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="cloudseed-scale-")
    total = args.calibrate + args.instances
    try:
        with running(os.path.join(tmp, "cloud"), args.servers) as cloud:
            started = time.monotonic()
            registry = open_registry(cloud.url)
            for first in range(0, total, 5000):
                registry.add_many([InstanceRecord(
                    instance_id=f"i-scale-{n:06d}", hostname=f"scale-{n}", macs=[server_bench.MAC],
                    addresses=[{"address": storm_address(n), "network": "default"}],
                    ssh_keys=[{"name": "k", "data": KEY}], user_data=b"#cloud-config\nruncmd: [echo hello]\n",
                    vendor_data={"cloud-init": "#cloud-config\n"}) for n in range(first, min(total, first + 5000))])
            registry.close()
            db_bytes = database_bytes(cloud)
            print(f"{total} instances registered in PostgreSQL in {time.monotonic() - started:.1f}s; database "
                  f"{db_bytes / 2**20:.1f} MiB ({db_bytes / total / 1024:.1f} KiB per instance)", flush=True)
            sequence = [(m, p, p.endswith(("meta_data.json", "instance-id"))) for m, p in server_bench.OPENSTACK_BOOT]
            rss_before = {n: rss_mib(proc.proc.pid) for n, proc in cloud.servers.items()}
            calibration = storm(cloud, 0, args.calibrate, tmp, sequence)
            report("calibration", args.calibrate, calibration, len(sequence))
            boots = args.calibrate
            cpu = calibration["cpu"]
            per_boot = {name: seconds / boots for name, seconds in cpu.items()}
            servers_cpu = sum(v for k, v in per_boot.items() if k.startswith("server"))
            statements_per_boot = calibration["statements"] / boots
            rss_after = {n: rss_mib(proc.proc.pid) for n, proc in cloud.servers.items()}
            per_cached = sum(rss_after[n] - rss_before[n] for n in rss_after) / boots  # MiB per cached instance
            print(f"model (per boot, from the calibration): servers {servers_cpu * 1e3:.2f} ms, haproxy "
                  f"{per_boot['haproxy'] * 1e3:.2f} ms, PostgreSQL {per_boot['postgresql'] * 1e3:.2f} ms CPU; "
                  f"{statements_per_boot:.1f} registry statements; {per_cached * 1024:.0f} KiB of server memory per "
                  f"cached instance; {db_bytes / total / 1024:.1f} KiB of database", flush=True)
            for instances in (10_000, 100_000):
                rate = instances / WINDOW
                print(f"  {instances} instances within {WINDOW / 60:.0f} min ({rate:.0f} boots/s, "
                      f"{rate * len(sequence):.0f} connections/s): server cores {rate * servers_cpu:.2f} -> "
                      f"{max(1, math.ceil(rate * servers_cpu / UTILISATION))} server process(es); haproxy cores "
                      f"{rate * per_boot['haproxy']:.2f}; PostgreSQL cores {rate * per_boot['postgresql']:.2f} "
                      f"({rate * statements_per_boot:.0f} statements/s); server memory for all of them cached "
                      f"{instances * per_cached:.0f} MiB in all; database {instances * db_bytes / total / 2**20:.0f} "
                      "MiB", flush=True)
            cores = os.cpu_count() or 1
            machine = sum(per_boot.values()) * args.instances / cores
            alone = calibration["boot_s"]
            if args.window:
                print(f"  predicted for {args.instances} starting over {args.window:.0f}s on this machine ({cores} "
                      f"cores, client included): utilisation {machine / args.window:.2f} of its cores by this "
                      f"work{' (keeps up: boots take about what they take alone)' if machine < args.window else ''}"
                      f"; at least {max(machine, args.window):.1f}s until the last is done", flush=True)
            else:
                print(f"  predicted for {args.instances} at once on this machine ({cores} cores, client "
                      f"included): {machine:.1f}s of CPU work per core", flush=True)
            big = storm(cloud, args.calibrate, args.instances, tmp, sequence, args.window)
            report("storm", args.instances, big, len(sequence))
            busy = sum(big["cpu"].values()) / cores
            print(f"  measured: last done after {big['last_done_s']:.1f}s against {max(machine, args.window):.1f}s "
                  f"predicted; this work kept the cores {busy / big['last_done_s']:.2f} busy (predicted "
                  f"{machine / max(machine, args.window):.2f}); boot p50/p99 {big['boot_s'][0]:.2f}/"
                  f"{big['boot_s'][1]:.2f}s (alone in the calibration p50 {alone[0]:.2f}s); per boot now: " + ", ".join(
                      f"{name} {seconds / args.instances * 1e3:.2f} ms" for name, seconds in big["cpu"].items()),
                  flush=True)
            return 0 if big["wrong"] == 0 and big["failures"] == 0 else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(name: str, count: int, result: dict, requests: int) -> None:
    done = sum(1 for boot in result["boots"] if boot[1] is not None and boot[3] == 0)
    took = sorted(boot[1] - boot[0] for boot in result["boots"] if boot[1] is not None) or [float("nan")]
    result["boot_s"] = (took[len(took) // 2], took[min(len(took) - 1, int(len(took) * 0.99))])
    statuses: dict[int, int] = {}
    for _, status in result["fails"]:
        statuses[status] = statuses.get(status, 0) + 1
    by_status = dict(sorted(statuses.items()))
    print(f"{name}: {count} instances x {requests} requests through haproxy: {done}/{count} provisioned, "
          f"last after {result['last_done_s']:.2f}s (median {result['median_boot_s']:.2f}s), p99 request "
          f"{result['p99_ms']:.1f} ms, boot p50/p99 {result['boot_s'][0]:.2f}/{result['boot_s'][1]:.2f}s, wrong "
          f"answers {result['wrong']}, failed attempts {len(result['fails'])} (by status {by_status}), "
          f"registry statements {result['statements']}, load {result['load']:.1f}; CPU seconds: " + ", ".join(
              f"{part} {seconds:.2f}" for part, seconds in result["cpu"].items()), flush=True)
    print(f"  503s answered by the servers: {result['servers_503']}; haproxy's servers changed state "
          f"{len(result['health'])} times" + "".join(f"\n    {line}" for line in result["health"][:12]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
