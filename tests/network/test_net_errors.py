"""Bad input gives a NetworkConfigError naming the key path, and nothing is written."""

from __future__ import annotations

import os

import pytest

from cloudseed.cli import main
from cloudseed.network import NetworkConfigError, parse


def v1(*entries):
    return {"version": 1, "config": list(entries)}


def eth(name="eth0", **kw):
    return dict({"type": "physical", "name": name}, **kw)


CASES = [
    # (id, config, kind, expected message fragment)
    ("unknown-version", {"version": 3, "config": []}, "auto",
     "version: unsupported network config version 3 (expected 1 or 2)"),
    ("missing-version", {"config": []}, "auto", "version: missing"),
    ("wrapped-unknown-version", {"network": {"version": "7"}}, "auto",
     "network.version: unsupported network config version '7'"),
    ("bad-cidr", v1(eth(), eth("eth1"), eth("eth2", subnets=[{"type": "static", "address": "x"}])), "auto",
     "config[2].subnets[0].address: 'x' is not a valid CIDR"),
    ("bad-prefix", v1(eth(subnets=[{"type": "static", "address": "10.0.0.1/33"}])), "auto",
     "config[0].subnets[0].address: '10.0.0.1/33' is not a valid CIDR"),
    ("bad-netmask", v1(eth(subnets=[{"type": "static", "address": "10.0.0.1", "netmask": "255.0.255.0"}])),
     "auto", "config[0].subnets[0].netmask: '255.0.255.0' is not a valid netmask"),
    ("vlan-missing-link", v1(eth(), {"type": "vlan", "name": "eth9.5", "vlan_link": "eth9", "vlan_id": 5}),
     "auto", "config[1].vlan_link: vlan link 'eth9' is not defined"),
    ("bond-no-members", v1({"type": "bond", "name": "bond0", "bond_interfaces": [],
                            "params": {"bond-mode": "active-backup"}}), "auto",
     "config[0].bond_interfaces: bond 'bond0' has no member interfaces"),
    ("duplicate-names", v1(eth(), eth(mac_address="52:54:00:00:00:01")), "auto",
     "config[1].name: duplicate interface name 'eth0' (also config[0])"),
    ("v2-duplicate-set-name", {"version": 2, "ethernets": {
        "a": {"match": {"macaddress": "52:54:00:00:00:01"}, "set-name": "eth0"},
        "b": {"match": {"macaddress": "52:54:00:00:00:02"}, "set-name": "eth0"}}}, "auto",
     "ethernets.b: duplicate interface name 'eth0' (also ethernets.a)"),
    ("v2-bad-cidr", {"version": 2, "ethernets": {"eth0": {"addresses": ["10.0.0.1/24", "fe80::1/200"]}}},
     "auto", "ethernets.eth0.addresses[1]: 'fe80::1/200' is not a valid CIDR"),
    ("v2-address-needs-prefix", {"version": 2, "ethernets": {"eth0": {"addresses": ["10.0.0.1"]}}}, "auto",
     "ethernets.eth0.addresses[0]: '10.0.0.1' has no prefix length"),
    ("v2-vlan-missing-link", {"network": {"version": 2, "ethernets": {"eth0": {}},
                                          "vlans": {"v5": {"id": 5, "link": "eth1"}}}}, "auto",
     "network.vlans.v5.link: vlan link 'eth1' is not defined"),
    ("v2-bond-no-members", {"version": 2, "bonds": {"bond0": {"parameters": {"mode": "802.3ad"}}}}, "auto",
     "bonds.bond0.interfaces: bond 'bond0' has no member interfaces"),
    ("v2-bond-unknown-member", {"version": 2, "ethernets": {"eth0": {}},
                                "bonds": {"bond0": {"interfaces": ["eth0", "eth7"]}}}, "auto",
     "bonds.bond0.interfaces[1]: interface 'eth7' is not defined"),
    ("v2-unknown-key", {"version": 2, "ethernets": {"eth0": {"dhcp44": True}}}, "auto",
     "ethernets.eth0.dhcp44: unknown key"),
    ("v2-wifi", {"version": 2, "wifis": {"wlan0": {}}}, "auto", "wifis: wifi configuration is not supported"),
    ("v2-gateway-family", {"version": 2, "ethernets": {"eth0": {"addresses": ["10.0.0.2/24"],
                                                                "gateway4": "fe80::1"}}}, "auto",
     "ethernets.eth0.gateway4: 'fe80::1' is not an IPv4 address"),
    ("bad-mac", v1(eth(mac_address="52:54:00:zz:00:01")), "auto",
     "config[0].mac_address: '52:54:00:zz:00:01' is not a MAC address"),
    ("bad-mtu", v1(eth(mtu=20)), "auto", "config[0].mtu: 20 is out of range"),
    ("bad-vlan-id", v1(eth(), {"type": "vlan", "name": "eth0.5000", "vlan_link": "eth0", "vlan_id": 5000}),
     "auto", "config[1].vlan_id: 5000 is out of range"),
    ("unknown-type", v1({"type": "tunnel", "name": "t0"}), "auto", "config[0].type: unknown entry type 'tunnel'"),
    ("unknown-subnet-type", v1(eth(subnets=[{"type": "dhcp5"}])), "auto",
     "config[0].subnets[0].type: unknown subnet type 'dhcp5'"),
    ("bad-bond-mode", v1(eth(), {"type": "bond", "name": "bond0", "bond_interfaces": ["eth0"],
                                 "params": {"bond-mode": "fastest"}}), "auto",
     "config[1].params.bond-mode: 'fastest' is not a bond mode"),
    ("member-twice", v1(eth(), {"type": "bond", "name": "b0", "bond_interfaces": ["eth0"]},
                        {"type": "bond", "name": "b1", "bond_interfaces": ["eth0"]}), "auto",
     "config[2].bond_interfaces[0]: interface 'eth0' is already a member of 'b0'"),
    ("member-with-address", v1(eth(subnets=[{"type": "dhcp"}]),
                               {"type": "bond", "name": "b0", "bond_interfaces": ["eth0"]}), "auto",
     "config[0].subnets: 'eth0' is a member of 'b0' and cannot have its own address configuration"),
    ("bad-route", v1(eth(subnets=[{"type": "static", "address": "10.0.0.2/24",
                                   "routes": [{"network": "10.1.0.0", "netmask": "255.255.0.0",
                                               "gateway": "10.0.0.256"}]}])), "auto",
     "config[0].subnets[0].routes[0].gateway: '10.0.0.256' is not a valid IP address"),
    ("bad-dns", v1({"type": "nameserver", "address": ["8.8.8.8", "dns.example"]}), "auto",
     "config[0].address[1]: 'dns.example' is not a valid IP address"),
    ("nameserver-unknown-interface", v1(eth(), {"type": "nameserver", "interface": "eth3", "address": "1.1.1.1"}),
     "auto", "config[1].interface: interface 'eth3' is not defined"),
    ("os-bad-ip", {"links": [{"id": "l0", "type": "phy", "name": "eth0"}],
                   "networks": [{"id": "n0", "type": "ipv4", "link": "l0", "ip_address": "10.0.0.1.5",
                                 "netmask": "255.255.255.0"}]}, "auto",
     "networks[0].ip_address: '10.0.0.1.5' is not a valid CIDR"),
    ("os-missing-link", {"links": [{"id": "l0", "type": "phy", "name": "eth0"}],
                         "networks": [{"id": "n0", "type": "ipv4_dhcp", "link": "l9"}]}, "auto",
     "networks[0].link: no link with id 'l9'"),
    ("os-vlan-missing-link", {"links": [{"id": "v", "type": "vlan", "vlan_link": "nope", "vlan_id": 4}]},
     "auto", "links[0].vlan_link: vlan link 'nope' is not defined"),
    ("os-unknown-mac", {"links": [{"id": "l0", "type": "phy", "ethernet_mac_address": "fa:16:3e:99:99:99"}]},
     "auto", "links[0].ethernet_mac_address: no network interface has MAC fa:16:3e:99:99:99"),
    ("bond-lacp-rate-word", {"version": 2, "ethernets": {"eth0": {}}, "bonds": {"bond0": {
        "interfaces": ["eth0"], "parameters": {"mode": "802.3ad", "lacp-rate": "quick"}}}}, "auto",
     "bonds.bond0.parameters.lacp-rate: 'quick' is not a lacp-rate value (one of slow, fast)"),
    ("v1-bond-hash-policy-word", v1(eth(), {"type": "bond", "name": "bond0", "bond_interfaces": ["eth0"],
                                            "params": {"bond-xmit_hash_policy": "layer5"}}), "auto",
     "config[1].params.bond-xmit_hash_policy: 'layer5' is not a transmit-hash-policy value"),
    ("v2-nameservers-one-string", {"version": 2, "ethernets": {"eth0": {"nameservers": {"addresses": "8.8.8.8"}}}},
     "auto", "ethernets.eth0.nameservers.addresses: expected a list, got str"),
    ("v2-dhcp-identifier-word", {"version": 2, "ethernets": {"eth0": {"dhcp4": True, "dhcp-identifier": "uuid"}}},
     "auto", "ethernets.eth0.dhcp-identifier: 'uuid' is not one of mac, duid"),
    ("v2-routing-policy-key", {"version": 2, "ethernets": {"eth0": {"routing-policy": [{"from": "10.0.0.5",
                                                                                      "tabel": 5}]}}},
     "auto", "ethernets.eth0.routing-policy[0].tabel: unknown key"),
    ("kind-mismatch", v1(eth()), "v2", "version: expected network config v2, got v1"),
    ("not-a-mapping", ["version", 1], "auto", "network config: expected a mapping, got list"),
]


@pytest.mark.parametrize("case_id,config,kind,message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_names_the_key(case_id, config, kind, message):
    with pytest.raises(NetworkConfigError) as exc:
        parse(config, kind=kind, macs={})
    assert message in str(exc.value), str(exc.value)


def test_the_documented_example_message():
    config = v1(eth(), eth("eth1"), eth("eth2", subnets=[{"type": "static", "address": "x"}]))
    with pytest.raises(NetworkConfigError, match=r"^config\[2\]\.subnets\[0\]\.address: 'x' is not a valid CIDR$"):
        parse(config, macs={})


@pytest.mark.parametrize("case_id,config,kind,message", CASES[:12], ids=[c[0] for c in CASES[:12]])
def test_cli_exits_non_zero_and_writes_nothing(case_id, config, kind, message, tmp_path, capsys):
    import json

    src = tmp_path / "config.json"
    src.write_text(json.dumps(config))
    out = tmp_path / "out"
    out.mkdir()
    rc = main(["net", "render", str(src), "--renderer", "netplan", "--root", str(out)])
    err = capsys.readouterr().err
    assert rc != 0
    assert message in err and str(src) in err
    assert os.listdir(out) == []


@pytest.mark.parametrize("renderer", ["eni", "netplan", "networkd", "sysconfig", "network-manager"])
def test_unreachable_route_is_left_out_with_a_warning_and_strict_writes_nothing(renderer, tmp_path, capsys):
    """One option a renderer cannot place never costs the rest of the config (at boot that would be a
    machine without network); the CLI names it, and with --strict fails before writing anything."""
    import yaml

    # the global route's gateway is on no interface's network: no renderer can place it
    config = {"version": 1, "config": [
        eth(mac_address="52:54:00:00:00:01", subnets=[{"type": "static", "address": "10.0.0.2/24"}]),
        {"type": "route", "destination": "10.9.0.0/16", "gateway": "192.168.77.1"},
        eth("eth1", mac_address="52:54:00:00:00:02", subnets=[{"type": "static", "address": "10.1.0.2/24"}]),
    ]}
    src = tmp_path / "c.yaml"
    src.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    out.mkdir()
    rc = main(["net", "render", str(src), "--renderer", renderer, "--root", str(out)])
    err = capsys.readouterr().err
    assert rc == 0
    assert "warning: routes[0]: cannot tell which interface reaches 192.168.77.1" in err
    assert "the route is left out" in err
    written = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert "10.0.0.2" in written and "10.1.0.2" in written and "10.9.0.0" not in written
    strict = tmp_path / "strict"
    strict.mkdir()
    rc = main(["net", "render", str(src), "--renderer", renderer, "--root", str(strict), "--strict"])
    assert rc == 1
    assert "error: routes[0]: cannot tell which interface reaches 192.168.77.1" in capsys.readouterr().err
    assert os.listdir(strict) == []


def test_non_string_keys_beside_network_are_named_not_a_crash():
    """Found by fuzzing (tests/fuzz/fuzz_agent.py network): a YAML integer key beside 'network' raised TypeError."""
    from cloudseed.network import NetworkConfigError, parse

    with pytest.raises(NetworkConfigError, match="unexpected key beside 'network'"):
        parse({"network": {"version": 2, "ethernets": {}}, 4: True, "x": 1}, macs={})
