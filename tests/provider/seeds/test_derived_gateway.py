"""A guest configured by our agent from a derived config drive reaches an address outside its subnet.

Issue 23: a config drive built from a record's static address had ``routes: []`` and no DNS, so a
guest booted from it had no default gateway. Here the whole way, in network namespaces:
``cloudseed instances add`` (an address with a prefix, no gateway given) -> ``cloudseed seed build
--kind configdrive --db`` -> the ISO on a loop device -> the agent's local stage (``cloudseed
--root ROOT init --local`` in the guest namespace, finding the drive by its label and rendering
ifupdown's configuration) -> ifupdown itself brings ``eth0`` up from that file (``--no-scripts``:
no host hooks) -> the guest opens a TCP connection to a host on another subnet, through a router
namespace at the subnet's first address. Before the fix the connection failed: "Network is
unreachable".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MAC = "52:54:00:23:00:05"

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("ifup"),
                                reason="needs root, loop devices and ifupdown")


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def namespaces():
    """guest (eth0) -- router (10.N.1.1 | 10.N.2.1) -- outside (10.N.2.2); names tagged with the pid."""
    tag = f"{os.getpid() % 100000}"
    net = 100 + os.getpid() % 100
    names = {"guest": f"cgwg{tag}", "router": f"cgwr{tag}", "outside": f"cgwo{tag}"}
    made = []
    try:
        for name in names.values():
            sh("ip", "netns", "add", name)
            made.append(name)
        g, r, o = names["guest"], names["router"], names["outside"]
        sh("ip", "link", "add", "eth0", "netns", g, "address", MAC, "type", "veth", "peer", "name", f"rg{tag}",
           "netns", r)
        sh("ip", "link", "add", f"ro{tag}", "netns", r, "type", "veth", "peer", "name", "eth0", "netns", o)
        for ns in made:
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", r, "addr", "add", f"10.{net}.1.1/24", "dev", f"rg{tag}")
        sh("ip", "-n", r, "addr", "add", f"10.{net}.2.1/24", "dev", f"ro{tag}")
        sh("ip", "-n", r, "link", "set", f"rg{tag}", "up")
        sh("ip", "-n", r, "link", "set", f"ro{tag}", "up")
        sh("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        sh("ip", "-n", o, "addr", "add", f"10.{net}.2.2/24", "dev", "eth0")
        sh("ip", "-n", o, "link", "set", "eth0", "up")
        sh("ip", "-n", o, "route", "add", "default", "via", f"10.{net}.2.1")
        yield names, net
    finally:
        for name in made:
            sh("ip", "netns", "del", name, check=False)


def agent_root(top: str) -> str:
    """A root the agent configures: ifupdown's files and tools (so it renders ENI), the NIC in sysfs."""
    for path, text in {"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n",
                       "etc/os-release": 'ID=debian\nVERSION_ID="12"\n',
                       "etc/network/interfaces": "source /etc/network/interfaces.d/*\n",
                       "etc/cloudseed/cloud.cfg.d/90-test.cfg": "datasource_list: [ConfigDrive]\n"
                                                                "system_info: {network: {renderers: [eni]}}\n",
                       "sys/class/net/eth0/address": MAC + "\n", "sys/class/net/eth0/carrier": "1\n",
                       "sys/class/net/eth0/operstate": "up\n", "sys/class/net/eth0/type": "1\n",
                       "sys/class/net/eth0/uevent": "INTERFACE=eth0\n"}.items():
        full = os.path.join(top, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as handle:
            handle.write(text)
    for tool in ("sbin/ifup", "sbin/ifdown", "sbin/ifquery"):
        full = os.path.join(top, tool)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as handle:
            handle.write("#!/bin/sh\nexit 0\n")
        os.chmod(full, 0o755)
    return top


def test_guest_from_a_derived_config_drive_reaches_another_subnet(namespaces, tmp_path):
    names, net = namespaces
    db, image = str(tmp_path / "registry.db"), str(tmp_path / "cd.iso")
    cloudseed = [sys.executable, "-m", "cloudseed"]
    sh(*cloudseed, "instances", "--db", db, "add", "--id", "gw-guest", "--hostname", "gw-guest",
       "--address", f"10.{net}.1.5/24", "--mac", MAC)
    sh(*cloudseed, "seed", "build", "--kind", "configdrive", "--db", db, "--instance", "gw-guest", "-o", image)
    device = sh("losetup", "-f", "--show", "-r", image).stdout.strip()
    try:
        root = agent_root(str(tmp_path / "root"))
        stage = subprocess.run(["ip", "netns", "exec", names["guest"], *cloudseed, "--root", root, "init", "--local"],
                               capture_output=True, text=True, timeout=120, cwd=REPO)
        assert stage.returncode == 0, stage.stdout + stage.stderr
    finally:
        sh("umount", device, check=False)
        sh("losetup", "-d", device, check=False)
    rendered = os.path.join(root, "etc/network/interfaces.d/50-cloudseed")
    with open(rendered) as handle:
        eni = handle.read()
    assert f"10.{net}.1.1" in eni, eni  # the derived gateway (and DNS server) are there
    state = tmp_path / "ifstate"
    state.mkdir()
    up = sh("ip", "netns", "exec", names["guest"], "ifup", "--no-scripts", "-i", rendered, "--state-dir", str(state),
            "eth0", check=False)
    assert up.returncode == 0, up.stdout + up.stderr
    routes = sh("ip", "-n", names["guest"], "route", "show", "default").stdout
    assert f"via 10.{net}.1.1" in routes, routes
    # a TCP listener on the outside host; the guest connects through the router and reads its greeting
    listener = subprocess.Popen(["ip", "netns", "exec", names["outside"], sys.executable, "-c", LISTENER],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout.readline().strip() == "listening"
        reached = sh("ip", "netns", "exec", names["guest"], sys.executable, "-c", CONNECT.replace("ADDRESS",
                     f"10.{net}.2.2"), check=False)
        assert reached.stdout.strip() == "hello from outside", reached.stdout + reached.stderr
    finally:
        listener.kill()
        listener.wait()


LISTENER = """
import socket
server = socket.create_server(("0.0.0.0", 2323))
print("listening", flush=True)
connection, _ = server.accept()
connection.sendall(b"hello from outside")
connection.close()
"""
CONNECT = """
import socket
with socket.create_connection(("ADDRESS", 2323), timeout=5) as s:
    print(s.recv(100).decode())
"""


# ------------------------------------------------------------------ the derivation, and cloud-init 22.4 reading it

def derived(**fields):
    from cloudseed.provider.instance_data.network import network_data, nocloud_network_config
    from cloudseed.provider.registry import InstanceRecord

    record = InstanceRecord.from_dict({"instance_id": "i-gw", **fields})
    doc = network_data(record)
    routes = [(n["link"], r["network"], r["gateway"]) for n in doc["networks"] for r in n.get("routes", [])]
    return doc, routes, [s["address"] for s in doc["services"]], nocloud_network_config(record)


def test_one_default_route_per_family_on_the_nic_whose_subnet_holds_it():
    two_nics = [{"address": "10.1.0.5", "prefix": 24, "mac": "52:54:00:00:00:01"},
                {"address": "10.2.0.5", "prefix": 24, "mac": "52:54:00:00:00:02"},
                {"address": "fd00:2::5", "prefix": 64, "mac": "52:54:00:00:00:02"}]
    _, routes, dns, v2 = derived(addresses=two_nics)
    assert routes == [("tap0", "0.0.0.0", "10.1.0.1"), ("tap1", "::", "fd00:2::1")]
    assert dns == ["10.1.0.1"]
    assert v2["ethernets"]["eth0"]["gateway4"] == "10.1.0.1" and "gateway4" not in v2["ethernets"]["eth1"]
    assert v2["ethernets"]["eth1"]["gateway6"] == "fd00:2::1"
    assert v2["ethernets"]["eth0"]["nameservers"] == {"addresses": ["10.1.0.1"]}
    # the operator's gateway goes on the NIC whose subnet holds it; their DNS servers are used
    _, routes, dns, _ = derived(addresses=two_nics, gateway=["10.2.0.254"], nameservers=["9.9.9.9"])
    assert routes == [("tap1", "0.0.0.0", "10.2.0.254")] and dns == ["9.9.9.9"]
    _, routes, dns, v2 = derived(addresses=two_nics, gateway=[], nameservers=[])
    assert routes == [] and dns == [] and "nameservers" not in v2["ethernets"]["eth0"]
    # DHCP on a NIC brings its own route: no derived IPv4 default then
    _, routes, _, _ = derived(addresses=[{"address": "10.1.0.5", "mac": "52:54:00:00:00:01"},
                                         {"address": "10.2.0.5", "prefix": 24, "mac": "52:54:00:00:00:02"}])
    assert routes == []
    # no room for a gateway, or the instance is the subnet's first address
    assert derived(addresses=["10.1.0.5/31", "10.3.0.1/24"])[1] == []


@pytest.mark.parametrize("field, value, where", [
    ("gateway", ["10.0.0.1", "10.0.0.2"], "gateway[1]"), ("gateway", ["nope"], "gateway[0]"),
    ("nameservers", "1.1.1.x", "nameservers[0]"), ("gateway", {"v4": "10.0.0.1"}, "gateway"),
])
def test_bad_gateway_or_nameservers_are_refused(field, value, where):
    from cloudseed.provider.registry import InstanceRecord, RecordError

    with pytest.raises(RecordError) as raised:
        InstanceRecord.from_dict({"instance_id": "i-gw", field: value})
    assert raised.value.field == where


READ_BOTH = """
import json, sys
from cloudinit.sources.helpers.openstack import convert_net_json
from cloudinit.net.network_state import parse_net_config_data
out = {}
for name, config in (("config drive", convert_net_json(json.loads(sys.argv[1]),
                                                       known_macs={"52:54:00:23:00:05": "eth0"})),
                     ("nocloud", json.loads(sys.argv[2]))):
    state = parse_net_config_data(config)
    gateways = []
    for iface in state.iter_interfaces():
        for subnet in iface.get("subnets", []):
            gateways += [subnet["gateway"]] if subnet.get("gateway") else []
            gateways += [r["gateway"] for r in subnet.get("routes", []) if r.get("prefix") == 0]
    dns = list(state.dns_nameservers)
    for iface in state.iter_interfaces():
        for subnet in iface.get("subnets", []):
            dns += subnet.get("dns_nameservers", [])
    out[name] = {"gateways": sorted(gateways), "dns": sorted(set(dns))}
print(json.dumps(out))
"""


@pytest.mark.reference
def test_cloud_init_reads_the_default_routes_and_dns():
    import json

    from tests.reference import reference_python

    doc, _, _, v2 = derived(addresses=["10.5.1.5/24", "fd00:5::5/64"], macs=[MAC])
    got = json.loads(reference_python(READ_BOTH, json.dumps(doc), json.dumps(v2)).stdout)
    for name in ("config drive", "nocloud"):
        assert got[name] == {"gateways": ["10.5.1.1", "fd00:5::1"], "dns": ["10.5.1.1"]}, name
