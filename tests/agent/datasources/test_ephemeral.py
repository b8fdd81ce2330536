"""Ephemeral DHCP against a real dnsmasq in a network namespace, option 121 included; no leftovers."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.agent.datasources.netlab import PYTHON, REPO, NetLab

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("dnsmasq"),
                                reason="needs root (network namespaces) and dnsmasq")


@pytest.fixture
def dhcp_lab(tmp_path):
    lab = NetLab(guest_configured=False)
    tree = tmp_path / "tree"
    (tree / "openstack").mkdir(parents=True)
    (tree / "openstack" / "probe").write_text("reached\n")
    yield lab, tree, tmp_path
    lab.close()


def _dnsmasq(lab: NetLab, tmp_path, *extra: str) -> None:
    s = lab.subnet
    lab.start_in_cloud(
        "dnsmasq", "--keep-in-foreground", "--no-daemon", "--port=0", "--bind-interfaces",
        f"--interface={lab.cloud_if}", "--except-interface=lo", "--no-resolv", "--no-hosts",
        f"--dhcp-range=10.77.{s}.50,10.77.{s}.60,255.255.255.0,2m",
        f"--dhcp-leasefile={tmp_path}/leases", f"--pid-file={tmp_path}/dnsmasq.pid",
        "--log-dhcp", *extra)


def _server(lab: NetLab, tree) -> None:
    lab.start_in_cloud(PYTHON, os.path.join(REPO, "tests/agent/datasources/mdserver.py"),
                       "--tree", str(tree), "--listen", "169.254.169.254:80", ready="ready")


GUEST_CODE = """
import json, subprocess, logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from cloudseed.core.root import TargetRoot
from cloudseed.agent.ephemeral import ephemeral_network
from cloudseed.core.http import fetch

def state():
    addrs = json.loads(subprocess.run(["ip", "-j", "-4", "addr", "show", "dev", IFACE],
                       capture_output=True, text=True).stdout)
    routes = json.loads(subprocess.run(["ip", "-j", "-4", "route", "show", "table", "all"],
                        capture_output=True, text=True).stdout)
    return {"addrs": [a["local"] + "/" + str(a["prefixlen"]) for i in addrs for a in i.get("addr_info", [])],
            "routes": [r for r in routes if r.get("type", "unicast") == "unicast" and r.get("table") != "local"]}

out = {"before": state()}
with ephemeral_network(TargetRoot("/"), INTERFACE) as lease:
    out["lease"] = {"address": lease.address, "prefix": lease.prefix, "routers": lease.routers,
                    "classless": lease.classless_routes, "interface": lease.interface}
    out["during"] = state()
    out["body"] = fetch("http://169.254.169.254/openstack/probe", timeout=3).decode()
out["after"] = state()
print(json.dumps(out))
"""


def _run(lab: NetLab, interface: str | None) -> dict:
    code = GUEST_CODE.replace("IFACE", repr(lab.guest_if)).replace("INTERFACE", repr(interface))
    return lab.guest_python(code)


def test_lease_with_router_adds_host_route_and_cleans_up(dhcp_lab):
    lab, tree, tmp_path = dhcp_lab
    _dnsmasq(lab, tmp_path, f"--dhcp-option=3,{lab.cloud_ip}")
    _server(lab, tree)
    # interface=None: the fallback NIC chooser must find the veth (the only Ethernet NIC)
    out = _run(lab, None)
    assert out["lease"]["interface"] == lab.guest_if
    assert out["lease"]["address"].startswith(f"10.77.{lab.subnet}.")
    assert out["lease"]["routers"] == [lab.cloud_ip]
    dests = {(r["dst"], r.get("gateway")) for r in out["during"]["routes"]}
    assert ("169.254.169.254", lab.cloud_ip) in dests
    assert not any(r["dst"] == "default" for r in out["during"]["routes"])
    assert out["body"] == "reached\n"
    assert out["before"] == out["after"] == {"addrs": [], "routes": []}


def test_option_121_classless_routes(dhcp_lab):
    lab, tree, tmp_path = dhcp_lab
    gw = lab.cloud_ip
    # 121 wins over option 3: the router below must be ignored
    _dnsmasq(lab, tmp_path, f"--dhcp-option=3,10.77.{lab.subnet}.9",
             f"--dhcp-option=121,169.254.169.254/32,{gw},192.168.77.0/24,{gw},0.0.0.0/0,{gw}")
    _server(lab, tree)
    out = _run(lab, lab.guest_if)
    assert out["lease"]["classless"] == [["169.254.169.254/32", gw], ["192.168.77.0/24", gw], ["0.0.0.0/0", gw]]
    routes = {(r["dst"], r.get("gateway")) for r in out["during"]["routes"]}
    assert {("169.254.169.254", gw), ("192.168.77.0/24", gw), ("default", gw)} <= routes
    assert not any(r.get("gateway") == f"10.77.{lab.subnet}.9" for r in out["during"]["routes"])
    assert out["body"] == "reached\n"
    assert out["after"] == {"addrs": [], "routes": []}, json.dumps(out["after"])


def test_no_dhcp_server_fails_fast_and_leaves_nothing(dhcp_lab):
    lab, _tree, _tmp = dhcp_lab
    code = f"""
import json, time, subprocess
from cloudseed.core.root import TargetRoot
from cloudseed.agent.ephemeral import ephemeral_network, EphemeralError
t = time.monotonic()
try:
    with ephemeral_network(TargetRoot("/"), {lab.guest_if!r}, timeout=1.5):
        err = None
except EphemeralError as e:
    err = str(e)
link = subprocess.run(["ip", "-o", "link", "show", "dev", {lab.guest_if!r}], capture_output=True, text=True).stdout
addrs = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
print(json.dumps({{"err": err, "took": time.monotonic() - t, "addrs": addrs}}))
"""
    out = lab.guest_python(code)
    assert out["err"] and lab.guest_if in out["err"] and "no DHCP answer" in out["err"]
    assert out["took"] < 3
    assert "10.77." not in out["addrs"]


def test_classless_route_parser_rejects_garbage():
    from cloudseed.agent.ephemeral import parse_classless_routes

    assert parse_classless_routes(bytes([0, 10, 0, 0, 1])) == [("0.0.0.0/0", "10.0.0.1")]
    assert parse_classless_routes(bytes([24, 192, 168, 1, 10, 0, 0, 1])) == [("192.168.1.0/24", "10.0.0.1")]
    with pytest.raises(ValueError):
        parse_classless_routes(bytes([24, 192, 168]))
    with pytest.raises(ValueError):
        parse_classless_routes(bytes([40, 1, 2, 3, 4, 5, 1, 1, 1, 1]))
