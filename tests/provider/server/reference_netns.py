"""Network namespaces where 169.254.169.254 is the server, and Debian's cloud-init run inside one.

Topology: ``srv`` runs the server on 169.254.169.254:80; ``gst`` (10.77.0.5) is wired to it
directly; ``far`` (10.78.0.5) reaches it through the router namespace ``rtr``, two hops away,
which is what the IMDSv2 hop limit is about. The conftest's ``router_namespaces`` fixture builds
it once per test module.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import textwrap

import pytest

from tests.reference import _env, reference_tree


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextlib.contextmanager
def router_namespaces():
    """The four namespaces (names by role, and ``gst_mac``), deleted on exit; skips without root."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = f"cs{os.getpid() % 100000}"
    names = {k: f"{tag}{k}" for k in ("srv", "gst", "rtr", "far")}
    try:
        for name in names.values():
            ip("netns", "add", name)
        srv, gst, rtr, far = names["srv"], names["gst"], names["rtr"], names["far"]
        for ns in names.values():
            ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "add", f"{tag}a", "netns", srv, "type", "veth", "peer", "name", "eth0", "netns", gst)
        ip("link", "add", f"{tag}b", "netns", srv, "type", "veth", "peer", "name", "up0", "netns", rtr)
        ip("link", "add", f"{tag}c", "netns", rtr, "type", "veth", "peer", "name", "eth0", "netns", far)
        ip("-n", srv, "addr", "add", "169.254.169.254/32", "dev", "lo")
        ip("-n", srv, "addr", "add", "10.77.0.1/24", "dev", f"{tag}a")
        ip("-n", srv, "addr", "add", "10.79.0.1/24", "dev", f"{tag}b")
        ip("-n", rtr, "addr", "add", "10.79.0.2/24", "dev", "up0")
        ip("-n", rtr, "addr", "add", "10.78.0.1/24", "dev", f"{tag}c")
        ip("-n", gst, "addr", "add", "10.77.0.5/24", "dev", "eth0")
        ip("-n", far, "addr", "add", "10.78.0.5/24", "dev", "eth0")
        for ns, dev in ((srv, f"{tag}a"), (srv, f"{tag}b"), (rtr, "up0"), (rtr, f"{tag}c"), (gst, "eth0"),
                        (far, "eth0")):
            ip("-n", ns, "link", "set", dev, "up")
        ip("-n", gst, "route", "add", "169.254.169.254/32", "via", "10.77.0.1")
        ip("-n", far, "route", "add", "default", "via", "10.78.0.1")
        ip("-n", srv, "route", "add", "10.78.0.0/24", "via", "10.79.0.2")
        ip("-n", rtr, "route", "add", "169.254.169.254/32", "via", "10.79.0.1")
        subprocess.run(["ip", "netns", "exec", rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
        mac = subprocess.run(["ip", "-n", gst, "-j", "link", "show", "eth0"], check=True, capture_output=True,
                             text=True).stdout
        names["gst_mac"] = json.loads(mac)[0]["address"]
        yield names
    finally:
        for name in names.values():
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def run_reference_in(ns: str, code: str, tmp: str) -> dict:
    if reference_tree() is None:
        pytest.skip("Debian's cloud-init could not be fetched")
    proc = subprocess.run(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", textwrap.dedent(code), tmp],
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


COMMON = """
import json, sys
from cloudinit import distros, helpers
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
distro = distros.fetch("debian")("debian", {}, paths)
def report(src, ok):
    print(json.dumps({"ok": ok, "metadata": src.metadata, "userdata": (src.userdata_raw or b"").decode()
                      if isinstance(src.userdata_raw, bytes) else src.userdata_raw,
                      "network_config": src.network_config, "keys": src.get_public_ssh_keys(),
                      "instance_id": src.get_instance_id(), "hostname": src.get_hostname().hostname,
                      "network_json": getattr(src, "network_json", None)}, default=str))
"""


def curl_in(ns: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, "curl", "-sS", "-m", "3", *args], capture_output=True,
                          text=True, timeout=20)
