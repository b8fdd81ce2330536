"""Metadata server benchmark: throughput and latency beside lighttpd, and a boot storm.

    .venv/bin/python bench/server_bench.py [--instances 100000] [--storm 2000] [--duration 10]
        [--processes N] [--client-processes 3]

1. Registers N instances in a fresh SQLite registry (instance k at loopback address 127.a.b.c).
2. Starts ``cloudseed serve`` (``processes: N`` in its settings; default one process) and, in the
   same run, lighttpd (one process, its default) serving the same responses of one instance as
   static files (the ZStack design), and drives both with wrk (mixed OpenStack/EC2 workload,
   keep-alive) for requests/s and p50/p99.
3. The same mixed workload from many instance source addresses (bench/server_storm.py: asyncio
   clients on plain sockets in several processes, one keep-alive connection per instance
   address) against cloudseed, which must identify each instance.
4. Boot storm: ``--storm`` instances at once, each doing the request sequence Debian's
   cloud-init 22.4 makes at boot (recorded from its access log in tests/provider/server:
   OpenStack 37 requests, EC2 with IMDSv2 36), one new connection per request like its
   ``readurl``, then the same with one keep-alive connection per instance; reports the time
   until the last instance finishes.

Client and server share the machine's cores; the load average is printed with each figure.
bench/server_cpu.py measures the server's CPU cost per request, which load does not change.
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
sys.path.insert(0, ROOT)

from cloudseed.provider.registry import InstanceRecord, open_registry  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench"))
import server_storm  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 bench@example"
MIXED = ["/openstack/latest/meta_data.json", "/openstack/latest/user_data", "/openstack/latest/network_data.json",
         "/openstack/latest/vendor_data.json", "/latest/meta-data/instance-id", "/latest/meta-data/hostname",
         "/latest/meta-data/local-ipv4", "/latest/meta-data/public-keys/0/openssh-key", "/latest/user-data",
         "/latest/meta-data/"]
MAC = "52:54:00:00:00:01"
_EC2_TREE = ["meta-data/", "meta-data/public-keys/", "meta-data/public-keys/0/openssh-key",
             "meta-data/block-device-mapping/", "meta-data/block-device-mapping/ami",
             "meta-data/block-device-mapping/root", "meta-data/placement/", "meta-data/placement/availability-zone",
             "meta-data/placement/region", "meta-data/network/", "meta-data/network/interfaces/",
             "meta-data/network/interfaces/macs/", f"meta-data/network/interfaces/macs/{MAC}/"] + [
    f"meta-data/network/interfaces/macs/{MAC}/{leaf}" for leaf in
    ("device-number", "interface-id", "local-hostname", "mac", "owner-id", "local-ipv4s")] + [
    f"meta-data/{leaf}" for leaf in ("ami-id", "ami-launch-index", "ami-manifest-path", "hostname", "instance-id",
                                     "local-hostname", "local-ipv4", "reservation-id", "security-groups",
                                     "instance-type", "mac")]
# --workload ec2: EC2 paths only, the documented categories real clients read (botocore's role
# credentials, a live leaf; the signed identity; per-interface VPC keys)
EC2_PATHS = [f"/latest/meta-data/{p}" for p in (
    "instance-id", "local-ipv4", "iam/security-credentials/", "iam/security-credentials/bench-role", "iam/info",
    "placement/availability-zone", "placement/region", "services/domain", "services/partition",
    "instance-life-cycle", "instance-action", f"network/interfaces/macs/{MAC}/subnet-id",
    f"network/interfaces/macs/{MAC}/vpc-id", f"network/interfaces/macs/{MAC}/security-group-ids",
    "identity-credentials/ec2/security-credentials/ec2-instance", "")] + [
    "/latest/dynamic/instance-identity/document", "/latest/dynamic/instance-identity/signature",
    "/latest/user-data"]
OPENSTACK_BOOT = [("GET", "/openstack"), ("GET", "/openstack")] + [
    ("GET", f"/openstack/2018-08-27/{f}") for f in
    ("meta_data.json", "user_data", "vendor_data.json", "vendor_data2.json", "network_data.json")] + [
    ("GET", f"/latest/{p}") for p in _EC2_TREE]
EC2_BOOT = [("PUT", "/latest/api/token"), ("GET", "/2021-03-23/meta-data/instance-id"),
            ("GET", "/2021-03-23/user-data")] + [("GET", f"/2021-03-23/{p}") for p in _EC2_TREE] + [
    ("GET", "/2021-03-23/dynamic/instance-identity"), ("GET", "/2021-03-23/dynamic/instance-identity/document")] + [
    # cloud-init 22.4 reads every leaf the identity listing names: the signed ones too (each new
    # instance costs the server one openssl signing, in a thread)
    ("GET", f"/2021-03-23/dynamic/instance-identity/{leaf}") for leaf in ("pkcs7", "signature", "rsa2048")]


def address_of(index: int) -> str:
    if index == 0:
        return "127.0.0.1"
    return f"127.{2 + index // 62500}.{(index // 250) % 250}.{index % 250 + 1}"


def populate(db: str, count: int) -> float:
    started = time.monotonic()
    registry = open_registry(db)
    batch = []
    for index in range(count):
        batch.append(InstanceRecord(
            instance_id=f"i-{index:08d}", hostname=f"vm-{index}", macs=[MAC],
            addresses=[{"address": address_of(index), "network": "default"}], ssh_keys=[{"name": "k", "data": KEY}],
            user_data=b"#cloud-config\nruncmd: [echo hello]\n", vendor_data={"cloud-init": "#cloud-config\n"},
            ec2={"iam_role": "bench-role"}))
        if len(batch) == 5000:
            registry.add_many(batch)
            batch = []
    if batch:
        registry.add_many(batch)
    registry.close()
    return time.monotonic() - started


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int) -> None:
    import socket

    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def static_tree(docroot: str, port: int, paths: list[str]) -> None:
    """Fetch instance 0's responses from cloudseed and store them as lighttpd static files."""
    import urllib.request

    for path in paths:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}{path}").read()
        target = os.path.join(docroot, path.lstrip("/"))
        if path.endswith("/"):
            target = os.path.join(target, "index.txt")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(body)


def start_lighttpd(docroot: str, port: int, tmp: str, backlog: int = 0) -> subprocess.Popen:
    """lighttpd serving ``docroot``; ``backlog``: its listen backlog (0: lighttpd's default, 1024)."""
    conf = os.path.join(tmp, "lighttpd.conf")
    with open(conf, "w") as handle:
        handle.write(f'server.document-root = "{docroot}"\nserver.port = {port}\nserver.bind = "127.0.0.1"\n'
                     'index-file.names = ("index.txt")\nmimetype.assign = ("" => "text/plain")\n'
                     'server.max-keep-alive-requests = 100000\nserver.errorlog = "/dev/null"\n'
                     + (f"server.listen-backlog = {backlog}\n" if backlog else ""))
    proc = subprocess.Popen(["lighttpd", "-D", "-f", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc


def run_wrk(port: int, tmp: str, duration: int, connections: int, paths: list[str]) -> dict:
    script = os.path.join(tmp, "mixed.lua")
    with open(script, "w") as handle:
        handle.write("paths = {" + ", ".join(f'"{p}"' for p in paths) + "}\ni = 0\n"
                     "request = function()\n  i = i % #paths + 1\n  return wrk.format('GET', paths[i])\nend\n")
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency", "-s", script,
                          f"http://127.0.0.1:{port}/"], capture_output=True, text=True, check=True).stdout

    def ms(label: str) -> float:
        value, unit = re.search(rf"\s{label}\s+([\d.]+)(us|ms|s)", out).groups()
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), "p50_ms": ms("50%"),
            "p99_ms": ms("99%"), "non_2xx": int(errors.group(1)) if errors else 0}


async def connect_from(source: str, port: int):
    """A connection from ``source`` without asyncio's threaded getaddrinfo (the storm's bottleneck)."""
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_IP, 24, 1)  # IP_BIND_ADDRESS_NO_PORT: pick the port at connect()
    sock.bind((source, 0))
    try:
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and its child processes (server workers)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


class Busy:
    """How much CPU the server used while a client ran: ``with Busy(pid) as busy: ...; busy.text``."""

    def __init__(self, pid: int):
        self.pid = pid

    def __enter__(self) -> Busy:
        self.cpu, self.wall = process_cpu(self.pid), time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu, self.wall = process_cpu(self.pid) - self.cpu, time.monotonic() - self.wall
        self.text = f"server CPU {self.cpu:.1f}s in {self.wall:.1f}s, {load()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=100_000)
    parser.add_argument("--storm", type=int, default=2000)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--sources", type=int, default=200, help="instance addresses of the many-source client")
    parser.add_argument("--access-log", action="store_true", help="keep the access log on (to a file)")
    parser.add_argument("--processes", type=int, default=1, help="cloudseed serve processes (SO_REUSEPORT)")
    parser.add_argument("--client-processes", type=int, default=3, help="processes of each Python client")
    parser.add_argument("--python-clients", action="store_true",
                        help="also the Python many-source client; Python instead of C for the boot storm")
    parser.add_argument("--db", help="use this registry (already holding --instances instances) instead")
    parser.add_argument("--tree", default=ROOT, help="run the server from this source tree (an older revision)")
    parser.add_argument("--workload", choices=("mixed", "ec2"), default="mixed",
                        help="wrk paths: OpenStack and EC2 (default), or EC2 only (EC2_PATHS)")
    parser.add_argument("--skip", action="append", default=[], choices=("wrk", "sources", "storm"))
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="cloudseed-bench-")
    try:
        db = args.db or os.path.join(tmp, "server.db")
        if not args.db:
            print(f"registering {args.instances} instances: {populate(db, args.instances):.1f}s", flush=True)
        port, static_port = free_port(), free_port()
        settings = os.path.join(tmp, "server.yaml")
        with open(settings, "w") as handle:
            handle.write("rate_limit: 0\n" + (f"processes: {args.processes}\n" if args.processes > 1 else ""))
        access_log = os.path.join(tmp, "access.log") if args.access_log else ""
        server = subprocess.Popen([sys.executable, "-m", "cloudseed", "serve", "--db", db, "--listen",
                                   f"127.0.0.1:{port}", "--access-log", access_log, "--config", settings],
                                  cwd=args.tree, stderr=subprocess.DEVNULL,
                                  env=dict(os.environ, PYTHONPATH=os.path.abspath(args.tree)))
        try:
            wait_port(port)
            time.sleep(1.0 + 0.5 * args.processes)  # workers bind after the first process
            if "wrk" not in args.skip:
                docroot = os.path.join(tmp, "static")
                paths = EC2_PATHS if args.workload == "ec2" else MIXED
                static_tree(docroot, port, paths)
                lighttpd = start_lighttpd(docroot, static_port, tmp)
                try:
                    with Busy(server.pid) as busy:
                        ours = run_wrk(port, tmp, args.duration, args.connections, paths)
                    ours["load"] = busy.text
                    theirs = run_wrk(static_port, tmp, args.duration, args.connections, paths)
                    theirs["load"] = load()
                finally:
                    lighttpd.send_signal(signal.SIGTERM)
                    lighttpd.wait()
                print(f"wrk {args.workload} workload, 1 source, {args.connections} connections, {args.duration}s, "
                      f"{args.processes} cloudseed process(es), 1 lighttpd process:")
                print(f"  cloudseed: {ours['rps']:.0f} req/s  p50 {ours['p50_ms']:.2f} ms  p99 {ours['p99_ms']:.2f} ms"
                      f"  non-2xx {ours['non_2xx']}  ({ours['load']})")
                print(f"  lighttpd:  {theirs['rps']:.0f} req/s  p50 {theirs['p50_ms']:.2f} ms  "
                      f"p99 {theirs['p99_ms']:.2f} ms  ({theirs['load']})")
                print(f"  ratio: {ours['rps'] / theirs['rps']:.2f} of lighttpd", flush=True)
            step = max(1, args.instances // args.sources)
            if "sources" not in args.skip:
                sources = [address_of(n * step) for n in range(args.sources)]
                repeats = max(1, 40_000 * args.duration // (args.sources * len(MIXED)))
                with Busy(server.pid) as busy:
                    spread = server_storm.boot_storm_c(port, sources, [("GET", p) for p in MIXED] * repeats, True,
                                                       tmp)
                print(f"many-source C client, {args.sources} instance addresses, one keep-alive connection each, "
                      f"{spread['requests']} requests: {spread['rps']:.0f} req/s  p50 {spread['p50_ms']:.2f} ms  "
                      f"p99 {spread['p99_ms']:.2f} ms  failures {spread['failures']}  ({busy.text})", flush=True)
                if args.python_clients:
                    with Busy(server.pid) as busy:
                        spread = server_storm.many_sources(port, sources, MIXED, args.duration, args.client_processes)
                    print(f"many-source Python client ({spread['processes']} processes), {spread['connections']} "
                          f"instance addresses, keep-alive: {spread['rps']:.0f} req/s  p50 {spread['p50_ms']:.2f} ms"
                          f"  p99 {spread['p99_ms']:.2f} ms  errors {spread['errors']}  ({busy.text})", flush=True)
            if "storm" not in args.skip:
                step = max(1, args.instances // args.storm)
                sources = [address_of(n * step + 1) for n in range(args.storm)]
                for keep_alive in (False, True):
                    for name, sequence in (("OpenStack", OPENSTACK_BOOT), ("EC2 IMDSv2", EC2_BOOT)):
                        with Busy(server.pid) as busy:
                            if args.python_clients:
                                storm = server_storm.boot_storm(port, sources, sequence, args.client_processes,
                                                                keep_alive)
                            else:
                                storm = server_storm.boot_storm_c(port, sources, sequence, keep_alive, tmp)
                        mode = "keep-alive per instance" if keep_alive else "new connection per request"
                        mode += ", Python client" if args.python_clients else ", C client"
                        print(f"boot storm {name}, {mode}: {storm['instances']} instances x "
                              f"{storm['requests_each']} requests ({storm['connections']} connections), last "
                              f"finished after {storm['last_done_s']:.2f}s (median {storm['median_boot_s']:.2f}s), "
                              f"failures {storm['failures']}  ({busy.text})", flush=True)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
