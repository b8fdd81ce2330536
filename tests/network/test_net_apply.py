"""apply_network: source precedence, once per instance/boot, renderer choice, fallback, activation."""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from cloudseed.network.apply import MARKER, apply_network
from tests.network.net_support import add_dev

V2_STATIC = {"version": 2, "ethernets": {"eth0": {"match": {"macaddress": "52:54:00:12:34:56"},
                                                  "set-name": "eth0", "addresses": ["10.5.0.5/24"]}}}
V1_SYSTEM = {"version": 1, "config": [{"type": "physical", "name": "eth0", "mac_address": "52:54:00:12:34:56",
                                       "subnets": [{"type": "static", "address": "10.6.0.6/24"}]}]}
DS = {"version": 1, "config": [{"type": "physical", "name": "eth0", "mac_address": "52:54:00:12:34:56",
                                "subnets": [{"type": "static", "address": "10.7.0.7/24"}]}]}


def tool(target, path):
    host = target.path(path)
    os.makedirs(os.path.dirname(host), exist_ok=True)
    with open(host, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(host, 0o755)


@pytest.fixture
def root(target):
    """A Debian-like root with netplan installed and one NIC (eth0, carrier)."""
    from pathlib import Path

    tool(target, "/usr/sbin/netplan")
    add_dev(Path(target.top), "eth0", "52:54:00:12:34:56")
    return target


def run(root, **kw):
    args = dict(system_cfg={}, datasource_config=None, cmdline="", distro="debian", new_instance=True,
                bring_up=False)
    args.update(kw)
    return apply_network(root, **args)


def netplan_of(root):
    return yaml.safe_load(root.read_text("/etc/netplan/50-cloudseed.yaml"))["network"]


def b64(cfg, gz=False):
    data = yaml.safe_dump(cfg).encode()
    return base64.b64encode(gzip.compress(data) if gz else data).decode()


# ---------------------------------------------------------------------- precedence
@pytest.mark.parametrize("gz", [False, True])
def test_cmdline_network_config_wins(root, gz):
    report = run(root, cmdline=f"ro quiet network-config={b64(V2_STATIC, gz)}",
                 system_cfg={"network": V1_SYSTEM}, datasource_config=DS)
    assert report["source"] == "cmdline" and report["applied"] and report["renderer"] == "netplan"
    assert report["files"] == ["/etc/netplan/50-cloudseed.yaml"]
    assert netplan_of(root)["ethernets"]["eth0"]["addresses"] == ["10.5.0.5/24"]
    assert oct(root.stat("/etc/netplan/50-cloudseed.yaml").st_mode & 0o777) == "0o600"


def test_system_config_beats_datasource(root):
    report = run(root, system_cfg={"network": V1_SYSTEM}, datasource_config=DS)
    assert report["source"] == "system_cfg"
    assert netplan_of(root)["ethernets"]["eth0"]["addresses"] == ["10.6.0.6/24"]


def test_datasource_used_when_nothing_else(root):
    report = run(root, datasource_config={"network": DS})
    assert report["source"] == "datasource"
    assert netplan_of(root)["ethernets"]["eth0"]["addresses"] == ["10.7.0.7/24"]


def test_fallback_dhcp_on_the_nic_by_mac(root):
    report = run(root)
    assert report["source"] == "fallback" and report["applied"]
    assert netplan_of(root)["ethernets"] == {"eth0": {"match": {"macaddress": "52:54:00:12:34:56"},
                                                      "set-name": "eth0", "dhcp4": True}}


@pytest.mark.parametrize("kw,source", [
    ({"cmdline": "network-config=disabled"}, "cmdline"),
    ({"system_cfg": {"network": {"config": "disabled"}}, "datasource_config": DS}, "system_cfg"),
    ({"datasource_config": {"network": {"config": "disabled"}}}, "datasource"),
])
def test_disabled(root, kw, source):
    report = run(root, **kw)
    assert report["skipped_reason"] == f"network configuration disabled by {source}"
    assert not report["applied"] and not root.exists("/etc/netplan") and not root.exists(MARKER)


def test_initramfs_klibc_files(root):
    root.write("/run/net-eth0.conf", "DEVICE='eth0'\nPROTO='none'\nIPV4ADDR='192.168.122.9'\n"
                                     "IPV4NETMASK='255.255.255.0'\nIPV4GATEWAY='192.168.122.1'\n"
                                     "IPV4DNS0='192.168.122.1'\nIPV4DNS1='0.0.0.0'\n")
    report = run(root, cmdline="root=/dev/vda1 ip=::::vm:eth0:none", system_cfg={"network": V1_SYSTEM})
    assert report["source"] == "initramfs"
    eth0 = netplan_of(root)["ethernets"]["eth0"]
    assert eth0["addresses"] == ["192.168.122.9/24"]
    assert eth0["routes"] == [{"to": "default", "via": "192.168.122.1"}]
    assert eth0["nameservers"] == {"addresses": ["192.168.122.1"]}
    assert eth0["activation-mode"] == "manual"          # the initramfs brings it up


def test_ip_param_without_klibc_files(root):
    report = run(root, cmdline="ip=10.9.0.9::10.9.0.1:255.255.255.0:host:eth0:off:1.1.1.1")
    assert report["source"] == "initramfs"
    eth0 = netplan_of(root)["ethernets"]["eth0"]
    assert eth0["addresses"] == ["10.9.0.9/24"] and eth0["nameservers"] == {"addresses": ["1.1.1.1"]}
    report = run(root, cmdline="ip=dhcp", new_instance=True)   # marker: already applied
    assert report["skipped_reason"] == "already applied in this boot"


def test_bad_cmdline_blob_is_reported_and_skipped(root):
    report = run(root, cmdline="network-config=!!notbase64!!", datasource_config=DS)
    assert report["source"] == "datasource" and report["applied"]
    assert "network-config=: not valid base64" in report["errors"][0]


# ---------------------------------------------------------------------- once per instance / boot
def test_only_on_a_new_instance(root):
    report = run(root, new_instance=False, datasource_config=DS)
    assert report["skipped_reason"].startswith("not a new instance") and not root.exists("/etc/netplan")


def test_every_boot_when_configured(root):
    cfg = {"updates": {"network": {"when": ["boot-new-instance", "boot"]}}}
    report = run(root, new_instance=False, datasource_config=DS, system_cfg=cfg)
    assert report["applied"]


def test_never_twice_in_one_boot(root):
    assert run(root, datasource_config=DS)["applied"]
    record = json.loads(root.read_text(MARKER))
    assert record["source"] == "datasource" and record["renderer"] == "netplan"
    assert record["files"] == ["/etc/netplan/50-cloudseed.yaml"]
    again = run(root, datasource_config=V1_SYSTEM)
    assert again["skipped_reason"] == "already applied in this boot" and not again["applied"]
    assert netplan_of(root)["ethernets"]["eth0"]["addresses"] == ["10.7.0.7/24"]


def test_marker_from_another_boot_is_ignored(root):
    root.write("/proc/sys/kernel/random/boot_id", "new-boot\n")
    root.write(MARKER, json.dumps({"boot_id": "old-boot", "source": "fallback"}))
    assert run(root, datasource_config=DS)["applied"]
    assert json.loads(root.read_text(MARKER))["boot_id"] == "new-boot"


# ---------------------------------------------------------------------- renderer choice
@pytest.mark.parametrize("tools,distro,expected", [
    (["/usr/sbin/netplan", "/sbin/ifup"], "debian", "netplan"),
    (["/sbin/ifup", "/sbin/ifdown", "/sbin/ifquery", "@/etc/network/interfaces"], "debian", "eni"),
    (["/usr/sbin/NetworkManager"], "debian", "network-manager"),
    (["/lib/systemd/systemd-networkd"], "debian", "networkd"),
    (["/usr/sbin/ifup", "@/etc/sysconfig/network-scripts/network-functions", "/usr/sbin/NetworkManager"],
     "rhel", "sysconfig"),
    (["/usr/sbin/NetworkManager", "/lib/systemd/systemd-networkd"], "rhel", "network-manager"),
])
def test_renderer_from_what_the_root_has(target, tools, distro, expected):
    from pathlib import Path

    for t in tools:
        if t.startswith("@"):
            target.write(t[1:], "")
        else:
            tool(target, t)
    add_dev(Path(target.top), "eth0", "52:54:00:12:34:56")
    from cloudseed.agent.distros import family_named  # the distro file declares its renderer order

    report = run(target, distro=family_named(distro))
    assert report["renderer"] == expected and report["applied"], report


def test_system_info_renderers_override(root):
    tool(root, "/lib/systemd/systemd-networkd")
    report = run(root, system_cfg={"system_info": {"network": {"renderers": ["networkd", "netplan"]}}})
    assert report["renderer"] == "networkd"
    assert "/etc/systemd/network/10-cloudseed-eth0.network" in report["files"]


def test_no_renderer(target):
    report = run(target, datasource_config=DS)
    assert report["skipped_reason"] == "no network renderer" and "no network renderer available" in report["errors"][0]
    assert not target.exists(MARKER)


# ---------------------------------------------------------------------- errors and cleanup
def test_bad_datasource_config_falls_back(root):
    bad = {"version": 1, "config": [{"type": "physical", "name": "eth0",
                                     "subnets": [{"type": "static", "address": "10.0.0.999/24"}]}]}
    report = run(root, datasource_config=bad)
    assert report["applied"] and report["source"] == "fallback (after an error in the datasource config)"
    assert "config[0].subnets[0].address: '10.0.0.999/24' is not a valid CIDR" in report["errors"][0]
    assert netplan_of(root)["ethernets"]["eth0"]["dhcp4"] is True


def test_stale_files_of_a_previous_render_are_removed(root):
    tool(root, "/lib/systemd/system/../systemd-networkd")
    root.write("/etc/systemd/network/10-cloudseed-eth9.network", "# Written by cloudseed\n[Match]\nName=eth9\n")
    root.write("/etc/systemd/network/10-cloudseed-mine.network", "[Match]\nName=mine\n")  # not ours
    report = run(root, system_cfg={"system_info": {"network": {"renderers": ["networkd"]}}})
    assert report["applied"]
    assert not root.exists("/etc/systemd/network/10-cloudseed-eth9.network")
    assert root.exists("/etc/systemd/network/10-cloudseed-mine.network")


# ---------------------------------------------------------------------- activation on a live system
class LiveRecorder:
    """The target root, pretending to be the running system, recording commands instead of running."""

    is_live = True

    def __init__(self, inner):
        self._inner = inner
        self.commands = []

    def run(self, argv, **kw):
        self.commands.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    def __getattr__(self, name):
        return getattr(self._inner, name)


@pytest.mark.parametrize("renderer,expected", [
    ("netplan", [["netplan", "generate"], ["netplan", "apply"]]),
    ("eni", [["ifup", "eth0"]]),
    ("networkd", [["networkctl", "reload"]]),
    ("network-manager", [["nmcli", "connection", "reload"], ["nmcli", "connection", "up", "uuid"]]),
])
def test_activation_on_a_live_root(root, renderer, expected):
    live = LiveRecorder(root)
    cfg = {"system_info": {"network": {"renderers": [renderer]}}}
    for t in ("/sbin/ifup", "/sbin/ifdown", "/sbin/ifquery", "/usr/sbin/NetworkManager",
              "/lib/systemd/systemd-networkd"):
        tool(root, t)
    root.write("/etc/network/interfaces", "")
    report = run(live, system_cfg=cfg, datasource_config=DS, bring_up=True)
    assert report["applied"] and report["activated"], report
    for want in expected:
        assert any(cmd[:len(want)] == want for cmd in live.commands), live.commands
    assert run(live, system_cfg=cfg, datasource_config=DS, bring_up=True)["skipped_reason"] == \
        "already applied in this boot"


def test_not_live_means_no_commands(root):
    report = run(root, datasource_config=DS, bring_up=True)
    assert report["applied"] and "activated" not in report


def test_rename_to_configured_name(target):
    from pathlib import Path

    tool(target, "/usr/sbin/netplan")
    add_dev(Path(target.top), "ens3", "52:54:00:12:34:56", carrier=0, operstate="down")
    live = LiveRecorder(target)
    run(live, datasource_config=DS)
    assert ["ip", "link", "set", "dev", "ens3", "name", "eth0"] in live.commands


# ---------------------------------------------------------------------- boot-path cost
def test_apply_is_cheap_to_import():
    code = ("import sys; before = set(sys.modules); import cloudseed.network.apply; "
            "print(sorted(m for m in set(sys.modules) - before if not m.startswith('_')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    new = eval(out)
    ours = [m for m in new if m.startswith("cloudseed")]
    assert ours == ["cloudseed", "cloudseed.network", "cloudseed.network.apply"]
    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    if stdlib:
        assert all(m.split(".")[0] in stdlib for m in new if not m.startswith("cloudseed")), new


# ---------------------------------------------------------------------- ifupdown's loopback
@pytest.mark.parametrize("system_file, ours", [
    ("source {d}/*\nauto lo\niface lo inet loopback\n", False),  # Debian's own
    ("source {d}/*\n# auto lo\niface lo inet loopback\n", True),  # not brought up by ifup -a
    ("source {d}/*\n", True),
])
def test_eni_defines_the_loopback_only_where_the_system_file_does_not(target, system_file, ours):
    """Where cloudseed differs from cloud-init (which always writes ``lo``): a second definition of
    ``lo`` makes ``ifup -a`` bring it up twice, every ``if-up.d`` hook again, on networking's path at
    every boot (0.4-0.5 s in the lab guest under emulation). It stays where it carries DNS."""
    from pathlib import Path

    for t in ("/sbin/ifup", "/sbin/ifdown", "/sbin/ifquery"):
        tool(target, t)
    target.write("/etc/network/interfaces", system_file.format(d=target.path("/etc/network/interfaces.d")))
    add_dev(Path(target.top), "eth0", "52:54:00:12:34:56")
    report = run(target)
    assert report["renderer"] == "eni" and report["applied"], report
    eni = target.read_text("/etc/network/interfaces.d/50-cloudseed")
    assert ("iface lo inet loopback" in eni) is ours
    assert "auto eth0\niface eth0 inet dhcp\n" in eni
    if shutil.which("ifup") and system_file.count("\nauto lo"):  # Debian's ifupdown: lo is raised once
        proc = subprocess.run(["ifup", "--no-act", "-v", "-i", target.path("/etc/network/interfaces"), "-a"],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert (proc.stdout + proc.stderr).count("configuring interface lo=lo (inet)") == 1


def test_eni_keeps_a_loopback_that_carries_the_instance_dns(target):
    from pathlib import Path

    for t in ("/sbin/ifup", "/sbin/ifdown", "/sbin/ifquery"):
        tool(target, t)
    target.write("/etc/network/interfaces", "source /etc/network/interfaces.d/*\nauto lo\niface lo inet loopback\n")
    add_dev(Path(target.top), "eth0", "52:54:00:12:34:56")
    with_dns = {"version": 1, "config": [
        {"type": "physical", "name": "eth0", "mac_address": "52:54:00:12:34:56", "subnets": [{"type": "dhcp"}]},
        {"type": "nameserver", "address": ["10.0.0.53"]}]}
    report = run(target, datasource_config=with_dns)
    assert report["renderer"] == "eni" and report["applied"], report
    eni = target.read_text("/etc/network/interfaces.d/50-cloudseed")
    assert "auto lo\niface lo inet loopback\n    dns-nameservers 10.0.0.53\n" in eni
