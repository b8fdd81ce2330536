"""The cost of signed answers and the memory of the per-path caches, on one ``cloudseed serve``.

1. Azure's attested document against an unsigned IMDS read (``/metadata/instance/compute``), the
   issue's target being signed at most 2x unsigned. Two cases of the attested document, because
   the server keeps a signed answer for the second it was made in (the document is fixed within
   a second for one instance and nonce): "repeated" reads the same target again and again (no
   nonce, as Azure's documented examples read it: one signature a second), "new nonce" sends a
   different nonce each request (a signature each). Each is compared like with like, twice:
   over keep-alive connections (wrk, 1 thread, 20 connections) and with a new connection per
   request (the same wrk with ``Connection: close``: how cloud-init and curl-in-a-script read).
   Per case: requests per second, the server's CPU per request (its CPU time over the requests
   answered: what the target is about; robust on a busy machine) and that cost as a multiple of
   the unsigned read's over the same kind of connection. The attested cases run with each key
   (``azure_attested_key``: ``ecdsa``, the default, then ``rsa``; one server each). GCE access
   and identity tokens (a new audience each request: a signature each) and Azure managed-identity
   tokens are measured over keep-alive too, and what one client sees (sequential requests on one
   connection, median).
2. Memory under a flood of distinct paths (item 4): the server's RSS before and after 20,000
   distinct missing GCE paths and 20,000 distinct Azure targets of 2 KB, each answered 404 or 200.

Only loopback. ``.venv/bin/python bench/credentials_bench.py [--duration 4] [--keys ecdsa,rsa]``
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import Busy, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V = "api-version=2021-08-01"
MD = {"Metadata": "true"}
GOOGLE = {"Metadata-Flavor": "Google"}
UNSIGNED = ("azure IMDS read (unsigned)", f"/metadata/instance/compute?{V}", "", MD)
ATTESTED = [UNSIGNED,
            ("azure attested, repeated", f"/metadata/attested/document?{V}", "", MD),
            ("azure attested, new nonce", f"/metadata/attested/document?{V}&nonce=", "n", MD)]
TOKENS = [
    ("azure managed-identity token", "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://r",
     "", MD),
    ("gce instance/id", "/computeMetadata/v1/instance/id", "", GOOGLE),
    ("gce access token", "/computeMetadata/v1/instance/service-accounts/default/token", "", GOOGLE),
    ("gce identity token (new audience)",
     "/computeMetadata/v1/instance/service-accounts/default/identity?format=full&audience=https://a", "x", GOOGLE),
]


def wrk(port: int, path: str, counter: str, headers: dict, tmp: str, duration: int, close: bool) -> tuple:
    """(requests answered, requests per second) of wrk on ``path`` (``counter``: a number appended each request)."""
    if close:
        headers = {**headers, "Connection": "close"}
    fields = "{" + ", ".join(f'["{k}"]="{v}"' for k, v in headers.items()) + "}"
    suffix = "..i" if counter else ""
    script = os.path.join(tmp, "case.lua")
    with open(script, "w") as handle:
        handle.write(f"i = 0\nrequest = function()\n  i = i + 1\n  return wrk.format('GET', '{path}'{suffix}, "
                     f"{fields})\nend\n")
    out = subprocess.run(["wrk", "-t1", "-c20", f"-d{duration}s", "-s", script, f"http://127.0.0.1:{port}/"],
                         capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"errors answered for {path}:\n{out}")
    done = int(re.search(r"(\d+) requests in", out).group(1))
    return done, float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def measure(pid: int, port: int, cases: list, tmp: str, duration: int, close: bool, label: str) -> None:
    """Each case: rate and server CPU per request, and that cost against the first case's."""
    base = None
    for name, path, counter, headers in cases:
        flood(port, 50, lambda i, p=path, c=counter: p + (f"{c}{i}" if c else ""), headers)  # warm
        with Busy(pid) as busy:
            done, rate = wrk(port, path, counter, headers, tmp, duration, close)
        cost = busy.cpu / done * 1e6
        base = base or cost
        print(f"{label:16s} {name:34s} {rate:8.0f} req/s  server CPU {cost:6.1f} us/request  x{cost / base:5.2f}  "
              f"({busy.text})", flush=True)


def sequential(port: int, cases: list) -> None:
    """What one client sees: the median round trip of 2,000 sequential requests on one connection."""
    for name, path, counter, headers in cases:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        times = []
        for i in range(2000):
            started = time.perf_counter()
            conn.request("GET", path + (f"{counter}{i}" if counter else ""), headers=headers)
            conn.getresponse().read()
            times.append(time.perf_counter() - started)
        conn.close()
        times.sort()
        print(f"one client {name:36s} sequential: median {times[1000] * 1e6:6.0f} us", flush=True)


def start_server(cli: list, db: str, port: int, tmp: str, key: str) -> subprocess.Popen:
    settings = os.path.join(tmp, f"server-{key}.yaml")
    with open(settings, "w") as handle:
        handle.write(f"azure_attested_key: {key}\nrate_limit: 0\n")
    server = subprocess.Popen([*cli, "serve", "--db", db, "--listen", f"127.0.0.1:{port}", "--config", settings,
                               "--access-log", ""], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return server


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return int(re.search(r"VmRSS:\s+(\d+)", handle.read()).group(1))


def flood(port: int, count: int, make_path, headers: dict) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for i in range(count):
        conn.request("GET", make_path(i), headers=headers)
        conn.getresponse().read()
    conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=4)
    parser.add_argument("--port", type=int, default=18190)
    parser.add_argument("--flood", type=int, default=20000)
    parser.add_argument("--keys", default="ecdsa,rsa", help="azure_attested_key values to measure, in order")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="credentials-bench-")
    try:
        run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def run(args: argparse.Namespace, tmp: str) -> None:
    cli = [sys.executable, "-m", "cloudseed"]
    db = os.path.join(tmp, "db")
    subprocess.run([*cli, "instances", "--db", db, "add", "--id", "4242", "--hostname", "bench",
                    "--address", "127.0.0.1/24", "--mac", "52:54:00:12:34:56", "--availability-zone", "zone-a-1"],
                   check=True, cwd=ROOT, capture_output=True)
    keys = args.keys.split(",")
    for key in keys:
        server = start_server(cli, db, args.port, tmp, key)
        try:
            for close, label in ((False, "keep-alive"), (True, "new conn.")):
                measure(server.pid, args.port, ATTESTED, tmp, args.duration, close, f"{key} {label}")
            sequential(args.port, ATTESTED)
            if key != keys[0]:
                continue
            measure(server.pid, args.port, [UNSIGNED] + TOKENS, tmp, args.duration, False, f"{key} keep-alive")
            flood_memory(server.pid, args.port, args.flood)
        finally:
            server.terminate()
            server.wait()


def flood_memory(pid: int, port: int, count: int) -> None:
    filler = "p" * 2000
    for name, make, headers in (
            ("gce missing paths", lambda i: f"/computeMetadata/v1/instance/{filler}{i}", GOOGLE),
            ("gce distinct queries", lambda i: f"/computeMetadata/v1/instance/id?x={filler}{i}", GOOGLE),
            ("azure missing paths", lambda i: f"/metadata/instance/compute/{filler}{i}?{V}", MD),
            ("azure distinct queries", lambda i: f"/metadata/instance/compute?{V}&x={filler}{i}", MD)):
        flood(port, 2000, make, headers)  # the first thousands: allocator and caches at rest
        before = rss_kib(pid)
        started = time.perf_counter()
        flood(port, count, lambda i, m=make: m(i + 10**6), headers)
        after = rss_kib(pid)
        print(f"{name:24s} {count} distinct 2 KB targets in {time.perf_counter() - started:5.1f} s: "
              f"RSS {before / 1024:6.1f} -> {after / 1024:6.1f} MiB ({(after - before) / before * 100:+.1f}%)",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
