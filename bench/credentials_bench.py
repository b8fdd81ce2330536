"""The cost of signed answers and the memory of the per-path caches, on one ``cloudseed serve``.

1. Azure's attested document (a PKCS#7 signed in process, a new nonce each request) against an
   unsigned IMDS read (``/metadata/instance/compute``): wrk, 1 thread, 20 keep-alive connections;
   the server process is the bottleneck, so its cost per request is 1 / (requests per second).
   The issue's target: signed at most 2x the unsigned cost. GCE access tokens, GCE identity tokens
   (new audience each request: a signature each) and Azure managed-identity tokens are measured too.
2. Memory under a flood of distinct paths (item 4): the server's RSS before and after 20,000
   distinct missing GCE paths and 20,000 distinct Azure targets of 2 KB, each answered 404 or 200.

Only loopback. ``.venv/bin/python bench/credentials_bench.py [--duration 4]``
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V = "api-version=2021-08-01"
CASES = [
    ("azure IMDS read (unsigned)", f"/metadata/instance/compute?{V}", "", {"Metadata": "true"}),
    ("azure attested document", f"/metadata/attested/document?{V}&nonce=", "n", {"Metadata": "true"}),
    ("azure managed-identity token", "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://r",
     "", {"Metadata": "true"}),
    ("gce instance/id", "/computeMetadata/v1/instance/id", "", {"Metadata-Flavor": "Google"}),
    ("gce access token", "/computeMetadata/v1/instance/service-accounts/default/token", "",
     {"Metadata-Flavor": "Google"}),
    ("gce identity token (new audience)",
     "/computeMetadata/v1/instance/service-accounts/default/identity?format=full&audience=https://a", "x",
     {"Metadata-Flavor": "Google"}),
]


def wrk(port: int, path: str, counter: str, headers: dict, tmp: str, duration: int) -> float:
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
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


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
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="credentials-bench-")
    cli = [sys.executable, "-m", "cloudseed"]
    db = os.path.join(tmp, "db")
    subprocess.run([*cli, "instances", "--db", db, "add", "--id", "4242", "--hostname", "bench",
                    "--address", "127.0.0.1/24", "--mac", "52:54:00:12:34:56", "--availability-zone", "zone-a-1"],
                   check=True, cwd=ROOT, capture_output=True)
    server = subprocess.Popen([*cli, "serve", "--db", db, "--listen", f"127.0.0.1:{args.port}", "--rate-limit", "0",
                               "--access-log", ""], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(args.port)
        rates = {}
        for name, path, counter, headers in CASES:
            flood(args.port, 50, lambda i, p=path, c=counter: p + (f"{c}{i}" if c else ""), headers)  # warm
            rates[name] = wrk(args.port, path, counter, headers, tmp, args.duration)
        base = rates[CASES[0][0]]
        for name, rate in rates.items():
            print(f"{name:36s} {rate:8.0f} req/s  cost {1e6 / rate:7.1f} us  x{base / rate:4.2f} of the unsigned "
                  "IMDS read", flush=True)
        # what one client sees: the median round trip of sequential requests on one connection
        for name, path, counter, headers in CASES[:2]:
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
            times = []
            for i in range(2000):
                started = time.perf_counter()
                conn.request("GET", path + (f"{counter}{i}" if counter else ""), headers=headers)
                conn.getresponse().read()
                times.append(time.perf_counter() - started)
            conn.close()
            times.sort()
            print(f"{name:36s} one client, sequential: median {times[1000] * 1e6:6.0f} us", flush=True)
        filler = "p" * 2000
        for name, make, headers in (
                ("gce missing paths", lambda i: f"/computeMetadata/v1/instance/{filler}{i}",
                 {"Metadata-Flavor": "Google"}),
                ("gce distinct queries", lambda i: f"/computeMetadata/v1/instance/id?x={filler}{i}",
                 {"Metadata-Flavor": "Google"}),
                ("azure missing paths", lambda i: f"/metadata/instance/compute/{filler}{i}?{V}", {"Metadata": "true"}),
                ("azure distinct queries", lambda i: f"/metadata/instance/compute?{V}&x={filler}{i}",
                 {"Metadata": "true"})):
            flood(args.port, 2000, make, headers)  # the first thousands: allocator and caches at rest
            before = rss_kib(server.pid)
            started = time.perf_counter()
            flood(args.port, args.flood, lambda i, m=make: m(i + 10**6), headers)
            after = rss_kib(server.pid)
            print(f"{name:24s} {args.flood} distinct 2 KB targets in {time.perf_counter() - started:5.1f} s: "
                  f"RSS {before / 1024:6.1f} -> {after / 1024:6.1f} MiB ({(after - before) / before * 100:+.1f}%)",
                  flush=True)
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
