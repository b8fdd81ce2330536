"""Parsers: v1, v2 and network_data.json into the one model; the model back to network_data.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudseed.core.root import TargetRoot
from cloudseed.network import NetworkConfigError, parse, render, to_network_data
from cloudseed.network.parsers import parse as parse_in_root
from tests.network.net_corpus import cases, load, macs_for
from tests.network.net_semantic import facts_netplan
from tests.network.net_support import add_dev


# ---------------------------------------------------------------------- v1
def test_v1_wrapped_and_bare_are_the_same():
    cfg = {"version": 1, "config": [{"type": "physical", "name": "eth0", "subnets": [{"type": "dhcp"}]}]}
    a, b = parse(cfg, macs={}), parse({"network": cfg}, macs={})
    assert a == b and a.interfaces["eth0"].subnets[0].type == "dhcp4"


@pytest.mark.parametrize("sub,cidr", [
    ({"address": "10.0.0.5", "netmask": "255.255.240.0"}, "10.0.0.5/20"),
    ({"address": "10.0.0.5/255.255.255.0"}, "10.0.0.5/24"),
    ({"address": "10.0.0.5", "prefix": 28}, "10.0.0.5/28"),
    ({"address": "10.0.0.5"}, "10.0.0.5/24"),
    ({"address": "2001:db8::5"}, "2001:db8::5/64"),
    ({"address": "2001:db8::5", "netmask": "ffff:ffff:ffff:ff00::"}, "2001:db8::5/56"),
    ({"address": "2001:DB8:0::5/48"}, "2001:db8::5/48"),
])
def test_v1_address_forms(sub, cidr):
    m = parse({"version": 1, "config": [{"type": "physical", "name": "eth0",
                                         "subnets": [dict(sub, type="static")]}]}, macs={})
    assert m.interfaces["eth0"].subnets[0].cidr == cidr


def test_v1_bond_bridge_params_are_canonical():
    m = parse({"version": 1, "config": [
        {"type": "physical", "name": "eth0"}, {"type": "physical", "name": "eth1"},
        {"type": "bond", "name": "bond0", "bond_interfaces": ["eth0"],
         "params": {"bond-mode": "4", "bond_miimon": "100", "bond-xmit-hash-policy": "layer2"}},
        {"type": "bridge", "name": "br0", "bridge_interfaces": ["eth1"],
         "params": {"bridge_stp": "on", "bridge_fd": 0, "bridge_pathcost": ["eth1 50"], "bridge_maxwait": 5}},
    ]}, macs={})
    assert m.interfaces["bond0"].bond_params == {"mode": "802.3ad", "mii-monitor-interval": 100,
                                                 "transmit-hash-policy": "layer2"}
    assert m.interfaces["br0"].bridge_params == {"stp": True, "forward-delay": 0, "path-cost": {"eth1": 50}}
    assert m.interfaces["eth0"].master == "bond0" and m.interfaces["eth1"].master == "br0"
    assert [i.name for i in m.ordered()] == ["eth0", "eth1", "bond0", "br0"]


def test_v1_dns_levels_and_routes():
    m = parse(load("v1-22-dns-everywhere.yaml"), macs={})
    assert m.nameservers == ["8.8.4.4"] and m.search == ["global.example"]
    assert m.interfaces["eth0"].subnets[0].nameservers == ["10.80.0.2"]
    m = parse(load("v1-21-interface-nameserver.yaml"), macs={})
    assert m.interfaces["eth0"].nameservers == ["10.70.0.2"]
    m = parse(load("v1-20-global-route.yaml"), macs={})
    assert (m.routes[0].destination, m.routes[0].gateway, m.routes[0].metric) == ("10.61.0.0/16", "10.60.0.254", 3)
    m = parse(load("v1-27-route-ipv6-default.yaml"), macs={})
    assert m.interfaces["eth0"].subnets[0].routes[0].destination == "0.0.0.0/0"   # prefix 0 is a prefix


# ---------------------------------------------------------------------- v2
def test_v2_set_name_and_member_ids():
    m = parse({"version": 2, "ethernets": {
        "lan-a": {"match": {"macaddress": "52:54:00:00:00:0a"}, "set-name": "eth0"},
        "lan-b": {"match": {"macaddress": "52:54:00:00:00:0b"}, "set-name": "eth1"}},
        "bonds": {"bond0": {"interfaces": ["lan-a", "lan-b"], "parameters": {"mode": "active-backup",
                                                                              "primary": "lan-b"}}}}, macs={})
    assert m.interfaces["bond0"].members == ["eth0", "eth1"]
    assert m.interfaces["bond0"].bond_params["primary"] == "eth1"
    assert m.interfaces["eth0"].set_name and m.interfaces["eth0"].mac == "52:54:00:00:00:0a"


def test_v2_mac_resolved_through_the_given_map_or_the_system(tmp_path):
    cfg = {"version": 2, "ethernets": {"nic": {"match": {"macaddress": "52:54:00:00:00:0c"}, "dhcp4": True}}}
    assert list(parse(cfg, macs={"52:54:00:00:00:0C": "ens9"}).interfaces) == ["ens9"]
    assert list(parse(cfg, macs={}).interfaces) == ["nic"]
    add_dev(tmp_path, "enp1s0", "52:54:00:00:00:0c")
    model = parse_in_root(cfg, root=TargetRoot(str(tmp_path)))
    assert list(model.interfaces) == ["enp1s0"] and not model.interfaces["enp1s0"].set_name


def test_v2_match_name_glob_and_literal():
    m = parse({"version": 2, "ethernets": {"all-en": {"match": {"name": "en*"}, "dhcp4": True},
                                           "x": {"match": {"name": "ens5"}, "dhcp6": True}}}, macs={})
    assert m.interfaces["all-en"].match_name == "en*"
    assert "ens5" in m.interfaces


def test_v2_gateways_routes_overrides():
    m = parse({"version": 2, "renderer": "networkd", "ethernets": {"eth0": {
        "dhcp4": True, "dhcp4-overrides": {"route-metric": 50, "use-dns": False},
        "gateway6": "2001:db8::1",
        "routes": [{"to": "default", "via": "10.0.0.1", "metric": 10},
                   {"to": "10.1.0.0/16", "via": "10.0.0.2", "on-link": True, "table": 7}]}}}, macs={})
    eth0 = m.interfaces["eth0"]
    assert m.renderer == "networkd"
    assert eth0.dhcp4_overrides == {"route-metric": 50, "use-dns": False}
    routes = [(r.destination, r.gateway, r.metric, r.on_link, r.table) for r in eth0.routes]
    assert routes == [("::/0", "2001:db8::1", None, False, None), ("0.0.0.0/0", "10.0.0.1", 10, False, None),
                      ("10.1.0.0/16", "10.0.0.2", None, True, 7)]


# ---------------------------------------------------------------------- OpenStack
def test_openstack_names_types_and_dns():
    m = parse(load("os-12-bond-vlan.json"), macs=macs_for("os-12-bond-vlan.json"))
    assert [(i.name, i.type) for i in m.ordered()] == [("eth0", "physical"), ("eth1", "physical"),
                                                       ("bond0", "bond"), ("bond0.300", "vlan")]
    assert m.interfaces["bond0"].bond_params == {"mode": "active-backup", "mii-monitor-interval": 100}
    assert m.nameservers == ["10.3.0.2"]
    m = parse(load("os-05-ipv6-netmask.json"), macs=macs_for("os-05-ipv6-netmask.json"))
    assert m.interfaces["eth1"].subnets[0].cidr == "2001:db8:5::5/64" and m.interfaces["eth1"].accept_ra is False


def test_openstack_per_network_dns_services():
    data = {"links": [{"id": "l", "type": "phy", "name": "eth0"}],
            "networks": [{"id": "n", "type": "ipv4", "link": "l", "ip_address": "10.0.0.2", "netmask": "255.255.255.0",
                          "services": [{"type": "dns", "address": "10.0.0.53"}]}]}
    assert parse(data).interfaces["eth0"].subnets[0].nameservers == ["10.0.0.53"]


# ---------------------------------------------------------------------- to_network_data
_NOT_EXPRESSIBLE = {
    "bridge": "cannot express a bridge",
    "override": "cannot express dhcp4-overrides",
    "search": "cannot express global search domains",
}


@pytest.mark.parametrize("case", cases())
def test_network_data_round_trip(case):
    """model -> network_data.json -> model renders the same netplan, or a clear refusal."""
    model = parse(load(case), macs=macs_for(case))
    try:
        data = to_network_data(model)
    except NetworkConfigError as e:
        assert any(text in str(e) for text in _NOT_EXPRESSIBLE.values()), str(e)
        return
    assert set(data) == {"links", "networks", "services"}
    macs = {i.mac: i.name for i in model.interfaces.values() if i.type == "physical" and i.mac}
    again = parse(data, kind="openstack", macs=macs)
    assert _netplan_facts(again) == _netplan_facts(model)


def _netplan_facts(model):
    files = render(model, "netplan")
    facts = facts_netplan({f.path: f.content for f in files})
    # network_data.json has no accept-ra (static IPv6 implies it off, DHCPv6 on) and no renderer
    return {f for f in facts if not (f[0] == "opt" and f[2] == "accept-ra") and f[0] != "renderer"}


def test_network_data_shape():
    data = to_network_data(parse(load("v1-26-bond-two-vlans.yaml"), macs={}))
    links = {link["id"]: link for link in data["links"]}
    assert links["bond0"]["type"] == "bond" and links["bond0"]["bond_links"] == ["eth0", "eth1"]
    assert links["bond0"]["bond_mode"] == "active-backup" and links["bond0"]["bond_miimon"] == 100
    assert links["bond0.10"] == {"id": "bond0.10", "name": "bond0.10", "type": "vlan", "vlan_link": "bond0",
                                 "vlan_id": 10}
    assert {n["type"] for n in data["networks"]} == {"ipv4_dhcp", "ipv4", "ipv6"}


def test_fallback_tree_root_is_a_path(tmp_path):
    add_dev(Path(tmp_path), "eth0", "52:54:00:00:00:01")
    assert parse_in_root({"links": [{"id": "a", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}]},
                         root=str(tmp_path)).interfaces["eth0"].mac == "52:54:00:00:00:01"
