"""Throughput and p99 of the GCE, DigitalOcean, Hetzner, Oracle, Azure (and OpenStack) APIs beside lighttpd.

One ``cloudseed serve`` with a one-instance registry, then one lighttpd process serving the same
answers as static files; wrk (1 thread, 50 keep-alive connections) cycles through 4 paths of each
API, GCE, Oracle and Azure requests carrying the headers their rules require. Run as root or not; it
only uses loopback. ``.venv/bin/python bench/cloud_apis_bench.py [--duration 4]``
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import start_lighttpd, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvVFenV4n3KLcbe42bjG/VeA8aGFXsM+fbfMA9qFdrd bench@example"
APIS = {
    "gce": (["/computeMetadata/v1/instance/id", "/computeMetadata/v1/instance/attributes/?recursive=true",
             "/computeMetadata/v1/project/?recursive=true", "/computeMetadata/v1/instance/hostname"],
            {"Metadata-Flavor": "Google"}),
    "digitalocean": (["/metadata/v1.json", "/metadata/v1/hostname", "/metadata/v1/interfaces/public/0/ipv4/address",
                      "/metadata/v1/public-keys"], {}),
    "hetzner": (["/hetzner/v1/userdata", "/hetzner/v1/metadata/instance-id", "/hetzner/v1/metadata/private-networks",
                 "/hetzner/v1/metadata/network-config"], {}),
    "oracle": (["/opc/v2/instance/", "/opc/v2/vnics/", "/opc/v2/instance/hostname", "/opc/v1/instance/"],
               {"Authorization": "Bearer Oracle"}),
    # IMDS (a JSON subtree, a text leaf, the versions) and the wire server's goal state; no path is
    # a prefix of another, so lighttpd can serve each answer as one file
    "azure": (["/metadata/instance/network?api-version=2021-08-01",
               "/metadata/instance/compute/vmId?api-version=2021-08-01&format=text", "/metadata/versions",
               "/machine/?comp=goalstate"], {"Metadata": "true", "x-ms-version": "2012-11-30"}),
    "openstack": (["/openstack/latest/network_data.json", "/openstack/latest/user_data",
                   "/openstack/latest/vendor_data.json", "/openstack/2012-08-10/user_data"], {}),
}


def wrk(port: int, paths: list[str], headers: dict, tmp: str, duration: int) -> tuple[float, float]:
    fields = "{" + ", ".join(f'["{k}"]="{v}"' for k, v in headers.items()) + "}" if headers else "nil"
    script = os.path.join(tmp, "paths.lua")
    with open(script, "w") as handle:
        handle.write("paths = {" + ", ".join(f'"{p}"' for p in paths) + "}\ni = 0\nrequest = function()\n"
                     f"  i = i % #paths + 1\n  return wrk.format('GET', paths[i], {fields})\nend\n")
    out = subprocess.run(["wrk", "-t1", "-c50", f"-d{duration}s", "--latency", "-s", script,
                          f"http://127.0.0.1:{port}/"], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"errors answered on port {port}:\n{out}")
    value, unit = re.search(r"\s99%\s+([\d.]+)(us|ms|s)", out).groups()
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), \
        float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=4)
    parser.add_argument("--port", type=int, default=18090)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="cloud-apis-bench-")
    cli = [sys.executable, "-m", "cloudseed"]
    with open(os.path.join(tmp, "key.pub"), "w") as handle:
        handle.write(KEY + "\n")
    with open(os.path.join(tmp, "user-data"), "w") as handle:
        handle.write("#cloud-config\nhostname: bench\n")
    db = os.path.join(tmp, "db")
    subprocess.run([*cli, "instances", "--db", db, "add", "--id", "4242", "--hostname", "bench",
                    "--address", "127.0.0.1/24", "--mac", "52:54:00:12:34:56", "--ssh-key", f"{tmp}/key.pub",
                    "--user-data", f"{tmp}/user-data", "--availability-zone", "zone-a-1"], check=True, cwd=ROOT,
                   capture_output=True)
    server = subprocess.Popen([*cli, "serve", "--db", db, "--listen", f"127.0.0.1:{args.port}", "--rate-limit", "0"],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(args.port)
        for name, (paths, headers) in APIS.items():
            docroot = os.path.join(tmp, name, "root")
            for path in paths:
                request = urllib.request.Request(f"http://127.0.0.1:{args.port}{path}", headers=headers)
                body = urllib.request.urlopen(request).read()
                target = os.path.join(docroot, path.split("?")[0].lstrip("/"))
                if target.endswith("/"):
                    target = os.path.join(target, "index.txt")
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as handle:
                    handle.write(body)
            ours = wrk(args.port, paths, headers, tmp, args.duration)
            static = start_lighttpd(docroot, args.port + 100, os.path.join(tmp, name))
            try:
                theirs = wrk(args.port + 100, paths, headers, tmp, args.duration)
            finally:
                static.terminate()
                static.wait()
            print(f"{name:12s} cloudseed {ours[0]:8.0f} req/s p99 {ours[1]:5.2f} ms | lighttpd {theirs[0]:8.0f} "
                  f"req/s p99 {theirs[1]:5.2f} ms | ratio {ours[0] / theirs[0]:.2f}", flush=True)
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
