"""Renderer specifics: paths and modes, what each leaves out, and the choices the reference leaves open."""

from __future__ import annotations

import pytest
import yaml

from cloudseed.network import NetworkConfigError, parse, render
from cloudseed.network.renderers import get_renderer, names

ALL = ["eni", "netplan", "networkd", "sysconfig", "network-manager"]


def files_of(cfg, renderer, distro="debian"):
    return {f.path: f for f in render(parse(cfg, macs={}), renderer, distro)}


def v1(*entries):
    return {"version": 1, "config": list(entries)}


def test_registry_lists_every_file():
    assert names() == sorted(ALL)
    for name in names():
        mod = get_renderer(name)
        assert name == mod.NAME and callable(mod.render) and callable(mod.available) and mod.OWNED
    with pytest.raises(NetworkConfigError, match="unknown renderer 'ifcfg'"):
        get_renderer("ifcfg")


@pytest.mark.parametrize("renderer,path,mode", [
    ("eni", "/etc/network/interfaces.d/50-cloudseed", 0o644),
    ("netplan", "/etc/netplan/50-cloudseed.yaml", 0o600),
    ("networkd", "/etc/systemd/network/10-cloudseed-eth0.network", 0o644),
    ("sysconfig", "/etc/sysconfig/network-scripts/ifcfg-eth0", 0o644),
    ("network-manager", "/etc/NetworkManager/system-connections/cloudseed-eth0.nmconnection", 0o600),
])
def test_paths_and_modes(renderer, path, mode):
    cfg = v1({"type": "physical", "name": "eth0", "mac_address": "52:54:00:00:00:01", "subnets": [{"type": "dhcp"}]})
    files = files_of(cfg, renderer)
    assert files[path].mode == mode
    assert "cloudseed" in files[path].content.splitlines()[0]


GLOB = {"version": 2, "ethernets": {"all-en": {"match": {"name": "en*"}, "dhcp4": True}}}


@pytest.mark.parametrize("renderer", ["eni", "sysconfig"])
def test_name_patterns_left_out_where_inexpressible(renderer):
    model = parse(GLOB, macs={})
    files = {f.path: f.content for f in render(model, renderer, "debian")}
    assert model.warnings == [f"interface 'all-en' (ethernets.all-en): the {renderer} renderer cannot express "
                              "matching interfaces by name pattern 'en*'; the interface is left out"]
    assert "all-en" not in "".join(files.values())


def test_name_patterns_where_expressible():
    assert "Name=en*" in files_of(GLOB, "networkd")["/etc/systemd/network/10-cloudseed-all-en.network"].content
    nm = files_of(GLOB, "network-manager")["/etc/NetworkManager/system-connections/cloudseed-all-en.nmconnection"]
    assert "[match]\ninterface-name=en*" in nm.content and "interface-name=all-en" not in nm.content
    net = yaml.safe_load(files_of(GLOB, "netplan")["/etc/netplan/50-cloudseed.yaml"].content)
    assert net["network"]["ethernets"]["all-en"] == {"match": {"name": "en*"}, "dhcp4": True}


OVERRIDES = {"version": 2, "ethernets": {"eth0": {"dhcp4": True, "dhcp4-overrides": {"use-dns": False,
                                                                                     "route-metric": 7}}}}


def test_dhcp_overrides():
    model = parse(OVERRIDES, macs={})
    eni = render(model, "eni")[0].content
    assert "iface eth0 inet dhcp\n    metric 7\n" in eni
    assert model.warnings == ["interface 'eth0' (ethernets.eth0): the eni renderer cannot express "
                              "dhcp4-overrides use-dns; rendered without it"]
    nd = files_of(OVERRIDES, "networkd")["/etc/systemd/network/10-cloudseed-eth0.network"].content
    assert "[DHCPv4]\nUseDNS=no\nRouteMetric=7" in nd
    nm = files_of(OVERRIDES, "network-manager")["/etc/NetworkManager/system-connections/cloudseed-eth0.nmconnection"]
    assert "ignore-auto-dns=true" in nm.content and "route-metric=7" in nm.content
    sc = files_of(OVERRIDES, "sysconfig", "rhel")["/etc/sysconfig/network-scripts/ifcfg-eth0"].content
    assert "PEERDNS=no" in sc and "METRIC=7" in sc


def test_broadcast():
    cfg = v1({"type": "physical", "name": "eth0", "subnets": [
        {"type": "static", "address": "10.0.0.2/24", "broadcast": "10.0.0.127"}]})
    for renderer in ("netplan", "network-manager"):
        model = parse(cfg, macs={})
        text = "".join(f.content for f in render(model, renderer))
        assert "10.0.0.2/24" in text and "10.0.0.127" not in text
        assert model.warnings == [f"interface 'eth0' (config[0]): the {renderer} renderer cannot express the "
                                  "broadcast address 10.0.0.127; the network's own broadcast address is used"]
    assert "broadcast 10.0.0.127" in files_of(cfg, "eni")["/etc/network/interfaces.d/50-cloudseed"].content
    assert "[Address]\nAddress=10.0.0.2/24\nBroadcast=10.0.0.127" in \
        files_of(cfg, "networkd")["/etc/systemd/network/10-cloudseed-eth0.network"].content
    # the default broadcast is no information: accepted everywhere
    cfg["config"][0]["subnets"][0]["broadcast"] = "10.0.0.255"
    for renderer in ALL:
        files_of(cfg, renderer)


def test_global_route_goes_to_the_interface_on_the_gateway_network():
    cfg = v1({"type": "physical", "name": "eth0", "subnets": [{"type": "static", "address": "10.0.0.2/24"}]},
             {"type": "physical", "name": "eth1", "subnets": [{"type": "static", "address": "192.168.5.2/24"}]},
             {"type": "route", "destination": "172.16.0.0/12", "gateway": "192.168.5.1", "metric": 9})
    net = yaml.safe_load(files_of(cfg, "netplan")["/etc/netplan/50-cloudseed.yaml"].content)["network"]
    assert net["ethernets"]["eth1"]["routes"] == [{"to": "172.16.0.0/12", "via": "192.168.5.1", "metric": 9}]
    assert "routes" not in net["ethernets"]["eth0"]
    sc = files_of(cfg, "sysconfig", "rhel")
    assert sc["/etc/sysconfig/network-scripts/route-eth1"].content.endswith(
        "ADDRESS0=172.16.0.0\nNETMASK0=255.240.0.0\nGATEWAY0=192.168.5.1\nMETRIC0=9\n")
    assert "post-up ip -4 route add 172.16.0.0/12 via 192.168.5.1 metric 9 dev eth1 || true" in \
        files_of(cfg, "eni")["/etc/network/interfaces.d/50-cloudseed"].content


def test_networkd_bond_members_rename_and_netdev():
    cfg = v1({"type": "physical", "name": "eth0", "mac_address": "52:54:00:00:00:01"},
             {"type": "physical", "name": "eth1", "mac_address": "52:54:00:00:00:02"},
             {"type": "bond", "name": "bond0", "bond_interfaces": ["eth0", "eth1"], "mac_address": "52:54:00:00:00:03",
              "params": {"bond-mode": "active-backup", "bond-miimon": 100, "bond-primary": "eth1"},
              "subnets": [{"type": "dhcp"}]})
    f = files_of(cfg, "networkd")
    d = "/etc/systemd/network/10-cloudseed-"
    assert "[Match]\nPermanentMACAddress=52:54:00:00:00:01\n\n[Link]\nName=eth0" in f[d + "eth0.link"].content
    assert "PermanentMACAddress=52:54:00:00:00:02\nName=eth1" in f[d + "eth1.network"].content
    assert "Bond=bond0\nPrimarySlave=yes" in f[d + "eth1.network"].content
    assert "[NetDev]\nName=bond0\nKind=bond\nMACAddress=52:54:00:00:00:03\n\n[Bond]\nMode=active-backup\n" \
           "MIIMonitorSec=100ms" in f[d + "bond0.netdev"].content


def test_sysconfig_global_dns_and_ipv6():
    cfg = v1({"type": "physical", "name": "eth0", "subnets": [
        {"type": "static", "address": "10.0.0.2/24", "gateway": "10.0.0.1"},
        {"type": "static6", "address": "2001:db8::2/64", "gateway": "2001:db8::1"}]},
        {"type": "nameserver", "address": ["10.0.0.53"], "search": ["example.com"]})
    f = files_of(cfg, "sysconfig", "rhel")
    assert f["/etc/resolv.conf"].content.endswith("nameserver 10.0.0.53\nsearch example.com\n")
    ifcfg = f["/etc/sysconfig/network-scripts/ifcfg-eth0"].content
    for line in ("IPADDR=10.0.0.2", "NETMASK=255.255.255.0", "GATEWAY=10.0.0.1", "IPV6ADDR=2001:db8::2/64",
                 "IPV6_DEFAULTGW=2001:db8::1", "IPV6INIT=yes", "DEFROUTE=yes", "BOOTPROTO=none"):
        assert line in ifcfg.splitlines()
    assert "NETWORKING_IPV6=yes" in f["/etc/sysconfig/network"].content


def test_manual_control():
    cfg = v1({"type": "physical", "name": "eth0", "subnets": [{"type": "dhcp", "control": "manual"}]})
    assert "auto eth0" not in files_of(cfg, "eni")["/etc/network/interfaces.d/50-cloudseed"].content
    assert yaml.safe_load(files_of(cfg, "netplan")["/etc/netplan/50-cloudseed.yaml"].content)[
        "network"]["ethernets"]["eth0"]["activation-mode"] == "manual"
    networkd = files_of(cfg, "networkd")["/etc/systemd/network/10-cloudseed-eth0.network"]
    assert "ActivationPolicy=manual" in networkd.content
    assert "autoconnect=false" in files_of(cfg, "network-manager")[
        "/etc/NetworkManager/system-connections/cloudseed-eth0.nmconnection"].content
    assert "ONBOOT=no" in files_of(cfg, "sysconfig", "rhel")["/etc/sysconfig/network-scripts/ifcfg-eth0"].content


def test_eni_vlan_with_any_name_gets_its_raw_device_and_id():
    cfg = v1({"type": "physical", "name": "eth0"},
             {"type": "vlan", "name": "mgmt", "vlan_link": "eth0", "vlan_id": 7})
    eni = files_of(cfg, "eni")["/etc/network/interfaces.d/50-cloudseed"].content
    assert "iface mgmt inet manual\n    vlan-raw-device eth0\n    vlan-id 7\n" in eni
    files_of(cfg, "netplan")


def test_nm_members_and_parents_by_uuid():
    from cloudseed.network.renderers.network_manager import con_uuid

    cfg = v1({"type": "physical", "name": "eth0", "mac_address": "52:54:00:00:00:01"},
             {"type": "bridge", "name": "br0", "bridge_interfaces": ["eth0"],
              "params": {"bridge_stp": "off", "bridge_pathcost": ["eth0 20"]}, "subnets": [{"type": "dhcp"}]},
             {"type": "vlan", "name": "br0.5", "vlan_link": "br0", "vlan_id": 5})
    f = files_of(cfg, "network-manager")
    eth0 = f["/etc/NetworkManager/system-connections/cloudseed-eth0.nmconnection"].content
    assert f"slave-type=bridge\nmaster={con_uuid('br0')}" in eth0 and "[bridge-port]\npath-cost=20" in eth0
    assert "[ipv4]" not in eth0
    vlan = f["/etc/NetworkManager/system-connections/cloudseed-br0.5.nmconnection"].content
    assert f"parent={con_uuid('br0')}" in vlan and "[ipv4]\nmethod=disabled" in vlan


def test_optional_interfaces_do_not_hold_up_boot():
    cfg = {"version": 2, "ethernets": {"eth0": {"dhcp4": True}, "eth1": {"dhcp4": True, "optional": True}}}
    eni = files_of(cfg, "eni")["/etc/network/interfaces.d/50-cloudseed"].content
    assert "auto eth0" in eni and "allow-hotplug eth1" in eni and "auto eth1" not in eni
    nd = files_of(cfg, "networkd")
    assert "RequiredForOnline=no" in nd["/etc/systemd/network/10-cloudseed-eth1.network"].content
    assert "RequiredForOnline" not in nd["/etc/systemd/network/10-cloudseed-eth0.network"].content
    net = yaml.safe_load(files_of(cfg, "netplan")["/etc/netplan/50-cloudseed.yaml"].content)["network"]
    assert net["ethernets"]["eth1"]["optional"] is True and "optional" not in net["ethernets"]["eth0"]
