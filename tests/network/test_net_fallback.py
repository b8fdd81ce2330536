"""Fallback NIC selection: on a fake /sys/class/net tree, and for real in a network namespace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from cloudseed.core.root import TargetRoot
from cloudseed.network import parse, render
from cloudseed.network.fallback import candidates, choose_fallback_nic, fallback_config
from tests.network.net_support import add_dev


@pytest.fixture
def sysroot(tmp_path):
    top = tmp_path / "root"
    top.mkdir()
    return top


def test_prefers_carrier(sysroot):
    add_dev(sysroot, "eth0", "52:54:00:00:00:10", carrier=0, operstate="down")
    add_dev(sysroot, "eth1", "52:54:00:00:00:11", carrier=1)
    assert choose_fallback_nic(TargetRoot(str(sysroot))) == ("eth1", "52:54:00:00:00:11")


def test_skips_loopback_veth_bridge_vlan_bond_and_macless(sysroot):
    add_dev(sysroot, "lo", "00:00:00:00:00:00", arptype=772, driver=None)
    add_dev(sysroot, "veth0a1b", "02:00:00:00:00:01", driver=None)
    add_dev(sysroot, "br0", "02:00:00:00:00:02", bridge=True, devtype="bridge", driver=None)
    add_dev(sysroot, "eth0.100", "02:00:00:00:00:03", devtype="vlan", driver=None)
    add_dev(sysroot, "bond0", "02:00:00:00:00:04", bond=True, devtype="bond", driver=None)
    add_dev(sysroot, "tun0", None, arptype=65534, driver=None)
    add_dev(sysroot, "zero0", "00:00:00:00:00:00")
    add_dev(sysroot, "ens7", "52:54:00:00:00:07", carrier=0, operstate="down")
    root = TargetRoot(str(sysroot))
    assert candidates(root) == [("ens7", "52:54:00:00:00:07")]
    assert choose_fallback_nic(root) == ("ens7", "52:54:00:00:00:07")


def test_eth_names_first_then_natural_order(sysroot):
    for name, n in (("ens3", 3), ("eth10", 10), ("eth2", 2), ("enp0s8", 8)):
        add_dev(sysroot, name, f"52:54:00:00:00:{n:02x}")
    root = TargetRoot(str(sysroot))
    assert [c[0] for c in candidates(root)] == ["eth2", "eth10", "enp0s8", "ens3"]


def test_possibly_connected_after_connected(sysroot):
    add_dev(sysroot, "eth0", "52:54:00:00:00:01", carrier=None, operstate="down")
    add_dev(sysroot, "eth5", "52:54:00:00:00:05", carrier=0, operstate="dormant")
    add_dev(sysroot, "ens9", "52:54:00:00:00:09", carrier=1)
    assert [c[0] for c in candidates(TargetRoot(str(sysroot)))] == ["ens9", "eth0", "eth5"]


def test_no_nic(sysroot):
    root = TargetRoot(str(sysroot))
    assert choose_fallback_nic(root) is None
    assert fallback_config(root) == {}


def test_fallback_config_matches_by_mac_and_renders_everywhere(sysroot):
    add_dev(sysroot, "ens3", "52:54:00:AB:CD:EF")
    cfg = fallback_config(TargetRoot(str(sysroot)))
    assert cfg == {"version": 2, "ethernets": {"ens3": {"match": {"macaddress": "52:54:00:ab:cd:ef"},
                                                         "set-name": "ens3", "dhcp4": True}}}
    model = parse(cfg, macs={})
    for renderer in ("eni", "netplan", "networkd", "sysconfig", "network-manager"):
        files = render(model, renderer)
        assert any("ens3" in f.content for f in files)


# ---------------------------------------------------------------------- real network namespace
def _ip(*args, ns=None, check=True):
    argv = ["ip", "netns", "exec", ns, "ip", *args] if ns else ["ip", *args]
    return subprocess.run(argv, capture_output=True, text=True, check=check)


@pytest.fixture
def netns():
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    name = f"cs-fallback-{uuid.uuid4().hex[:8]}"
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode != 0:
        pytest.skip("cannot create a network namespace here")
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        assert name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def _choose_in(ns: str):
    """Run choose_fallback_nic on the live root inside the namespace (ip netns exec remounts /sys)."""
    code = ("import json; from cloudseed.core.root import TargetRoot; "
            "from cloudseed.network.fallback import candidates; "
            "print(json.dumps(candidates(TargetRoot('/'))))")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    proc = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code],
                          capture_output=True, text=True, env=env, check=True)
    return [tuple(c) for c in json.loads(proc.stdout)]


@pytest.mark.root
def test_real_veth_pairs_in_a_namespace(netns):
    # guest NICs are veth ends renamed eth0/eth1/ens3; their peers keep veth-* names (skipped)
    for nic, peer in (("eth0", "veth-p0"), ("eth1", "veth-p1"), ("ens3", "veth-p3")):
        _ip("link", "add", nic, "type", "veth", "peer", "name", peer, ns=netns)
        _ip("link", "set", nic, "up", ns=netns)
    _ip("link", "set", "veth-p1", "up", ns=netns)        # eth1 gets carrier
    _ip("link", "set", "veth-p3", "up", ns=netns)        # ens3 gets carrier
    _ip("link", "add", "br0", "type", "bridge", ns=netns)
    _ip("link", "set", "br0", "up", ns=netns)
    # VLANs need the 8021q module, which a container's kernel may lack (the fake tree covers them)
    if _ip("link", "add", "link", "eth1", "name", "eth1.10", "type", "vlan", "id", "10", ns=netns,
           check=False).returncode == 0:
        _ip("link", "set", "eth1.10", "up", ns=netns)
    _ip("link", "set", "lo", "up", ns=netns)

    found = _choose_in(netns)
    names = [n for n, _mac in found]
    assert names[:2] == ["eth1", "ens3"], found          # carrier first, eth-style names first
    assert names[2:] == ["eth0"]                         # no carrier (peer down): after them
    assert not {"lo", "br0", "eth1.10", "veth-p0", "veth-p1", "veth-p3"} & set(names)
    mac = _ip("-j", "link", "show", "eth1", ns=netns).stdout
    assert json.loads(mac)[0]["address"] == found[0][1]

    _ip("link", "set", "veth-p0", "up", ns=netns)        # now eth0 has carrier too: eth0 wins
    assert _choose_in(netns)[0][0] == "eth0"


def test_chosen_nic_is_a_tuple_whose_str_is_the_name(sysroot):
    add_dev(sysroot, "ens3", "52:54:00:00:00:03")
    nic = choose_fallback_nic(TargetRoot(str(sysroot)))
    name, mac = nic
    assert (name, mac) == nic == ("ens3", "52:54:00:00:00:03")
    assert str(nic) == nic.name == "ens3" and nic.mac == mac
