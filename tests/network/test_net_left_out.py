"""Options a renderer cannot express are left out and named; the rest of the config is rendered.

At boot a refused network config is a machine with no network, so each renderer writes what it
can and warns, naming the option, the interface and the renderer. cloud-init 22.4 drops several
of these silently (``test_*_silently_by_the_reference`` below name those deliberate differences).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from cloudseed.network import parse, render

ALL = ["eni", "netplan", "networkd", "sysconfig", "network-manager"]
MAC = "52:54:00:12:34:56"


def rendered(cfg: dict, renderer: str):
    model = parse(cfg, macs={})
    distro = "rhel" if renderer == "sysconfig" else "debian"
    return {f.path: f.content for f in render(model, renderer, distro)}, model.warnings


# ---------------------------------------------------------------- dhcp6-overrides route-metric (12.4)
DHCP6_METRIC = {"version": 2, "ethernets": {"eth0": {"dhcp6": True, "dhcp6-overrides": {"route-metric": 50}}}}


@pytest.mark.parametrize("renderer", ALL)
def test_dhcp6_route_metric_is_accepted_by_every_renderer(renderer):
    files, warnings = rendered(DHCP6_METRIC, renderer)
    text = "".join(files.values())
    assert "eth0" in text
    if renderer == "netplan":
        net = yaml.safe_load(files["/etc/netplan/50-cloudseed.yaml"])["network"]
        assert net["ethernets"]["eth0"]["dhcp6-overrides"] == {"route-metric": 50}
        assert warnings == []
    elif renderer == "networkd":
        assert "[DHCPv6]\nRouteMetric=50\n" in files["/etc/systemd/network/10-cloudseed-eth0.network"]
        assert warnings == []
    elif renderer == "network-manager":
        nm = files["/etc/NetworkManager/system-connections/cloudseed-eth0.nmconnection"]
        assert "[ipv6]\nmethod=auto\nmay-fail=false\nroute-metric=50\n" in nm
        assert warnings == []
    else:   # ifupdown and network-scripts have no such option: said, not dropped silently
        assert warnings == [f"interface 'eth0' (ethernets.eth0): the {renderer} renderer cannot express "
                            "dhcp6-overrides route-metric; rendered without it"]


@pytest.mark.skipif(not shutil.which("netplan"), reason="netplan.io not installed")
def test_netplan_itself_accepts_the_dhcp6_metric_and_hotplug_output(tmp_path):
    for cfg in (DHCP6_METRIC, HOTPLUG):
        files, _ = rendered(cfg, "netplan")
        top = tmp_path / str(id(cfg))
        path = top / "etc/netplan/50-cloudseed.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(files["/etc/netplan/50-cloudseed.yaml"])
        path.chmod(0o600)
        proc = subprocess.run(["netplan", "generate", "--root-dir", str(top)], capture_output=True, text=True)
        assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr


# ---------------------------------------------------------------- loopback with addresses and DNS (12.5)
LOOPBACK = {"version": 1, "config": [
    {"type": "loopback", "name": "lo", "subnets": [
        {"type": "static", "address": "127.0.0.2/8", "dns_nameservers": ["10.0.0.53"],
         "dns_search": ["example.com"]}]},
    {"type": "physical", "name": "eth0", "mac_address": MAC, "subnets": [{"type": "dhcp4"}]},
]}


@pytest.mark.parametrize("renderer", ALL)
def test_loopback_addresses_never_cost_the_real_nic_and_its_dns_is_kept(renderer):
    files, warnings = rendered(LOOPBACK, renderer)
    text = "".join(files.values())
    assert "eth0" in text, "the real NIC's config must be rendered"
    assert "10.0.0.53" in text and "example.com" in text, "the DNS given on lo is system-wide DNS"
    if renderer == "eni":
        eni = files["/etc/network/interfaces.d/50-cloudseed"]
        assert ("iface lo inet loopback\n    dns-nameservers 10.0.0.53\n    dns-search example.com\n" in eni)
        assert "address 127.0.0.2/8" in eni
        assert warnings == []
    else:
        assert "127.0.0.2" not in text
        assert warnings == [f"interface 'lo' (config[0]): the {renderer} renderer cannot express addresses on "
                            "the loopback interface; the loopback interface keeps only 127.0.0.1"]


# ---------------------------------------------------------------- control: hotplug (12.6)
HOTPLUG = {"version": 1, "config": [
    {"type": "physical", "name": "eth0", "mac_address": MAC, "subnets": [{"type": "dhcp4", "control": "hotplug"}]}]}


def test_hotplug_is_brought_up_when_it_appears_not_left_down():
    files, warnings = rendered(HOTPLUG, "netplan")
    eth0 = yaml.safe_load(files["/etc/netplan/50-cloudseed.yaml"])["network"]["ethernets"]["eth0"]
    assert "activation-mode" not in eth0          # manual would leave it down for good
    assert eth0["optional"] is True               # the boot does not wait for it
    assert eth0["dhcp4"] is True and warnings == []
    manual = {"version": 1, "config": [
        {"type": "physical", "name": "eth0", "mac_address": MAC, "subnets": [{"type": "dhcp4", "control": "manual"}]}]}
    files, _ = rendered(manual, "netplan")
    eth0 = yaml.safe_load(files["/etc/netplan/50-cloudseed.yaml"])["network"]["ethernets"]["eth0"]
    assert eth0["activation-mode"] == "manual"


# ---------------------------------------------------------------- NetworkManager IPv6 nameserver (12.7)
def test_network_manager_keeps_an_ipv6_nameserver_in_its_own_family():
    cfg = {"version": 1, "config": [
        {"type": "physical", "name": "eth0", "mac_address": MAC, "subnets": [
            {"type": "static", "address": "10.0.0.2/24", "dns_nameservers": ["10.0.0.53", "2001:db8::53"]}]}]}
    files, warnings = rendered(cfg, "network-manager")
    nm = files["/etc/NetworkManager/system-connections/cloudseed-eth0.nmconnection"]
    ipv4 = nm.split("[ipv4]")[1].split("[")[0]
    ipv6 = nm.split("[ipv6]")[1].split("[")[0]
    assert "dns=10.0.0.53;" in ipv4 and "2001:db8::53" not in ipv4
    assert "method=auto\nmay-fail=true\ndns=2001:db8::53;" in ipv6
    assert warnings == []


# ---------------------------------------------------------------- overrides, set-name, VLAN names (12.8)
OVERRIDES = {"version": 2, "ethernets": {
    "eth0": {"dhcp4": True, "dhcp4-overrides": {"use-dns": False, "use-hostname": False, "route-metric": 100,
                                                "hostname": "web1"}}}}


@pytest.mark.parametrize("renderer", ["eni", "network-manager", "sysconfig"])
def test_dhcp4_overrides_render_what_the_format_has_and_name_the_rest(renderer):
    files, warnings = rendered(OVERRIDES, renderer)
    text = "".join(files.values())
    if renderer == "eni":
        assert "iface eth0 inet dhcp\n    metric 100\n    hostname web1\n" in text
        left = ["use-dns", "use-hostname"]
    elif renderer == "network-manager":
        assert "ignore-auto-dns=true" in text and "route-metric=100" in text and "dhcp-hostname=web1" in text
        left = ["use-hostname"]
    else:
        assert "PEERDNS=no" in text and "METRIC=100" in text and "DHCP_HOSTNAME=web1" in text
        left = ["use-hostname"]
    assert warnings == [f"interface 'eth0' (ethernets.eth0): the {renderer} renderer cannot express "
                        f"dhcp4-overrides {key}; rendered without it" for key in left]


SET_NAME = {"version": 2, "ethernets": {"id1": {"match": {"name": "ens3"}, "set-name": "lan0", "dhcp4": True}}}


@pytest.mark.parametrize("renderer", ["eni", "sysconfig"])
def test_match_by_exact_name_with_set_name_is_a_udev_rename(renderer):
    files, warnings = rendered(SET_NAME, renderer)
    rules = files["/etc/udev/rules.d/70-cloudseed-net.rules"]
    assert 'SUBSYSTEM=="net", ACTION=="add", KERNEL=="ens3", NAME="lan0"' in rules
    text = "".join(files.values())
    assert ("iface lan0 inet dhcp" in text) if renderer == "eni" else ("DEVICE=lan0" in text)
    assert warnings == []


@pytest.mark.skipif(not shutil.which("ifup"), reason="ifupdown not installed")
def test_ifupdown_accepts_a_vlan_with_any_name(tmp_path):
    cfg = {"version": 2, "ethernets": {"eth0": {"dhcp4": True}},
           "vlans": {"mgmt": {"id": 12, "link": "eth0", "addresses": ["10.12.0.2/24"]}}}
    files, warnings = rendered(cfg, "eni")
    eni = files["/etc/network/interfaces.d/50-cloudseed"]
    assert "iface mgmt inet static\n    address 10.12.0.2/24\n    vlan-raw-device eth0\n    vlan-id 12\n" in eni
    assert warnings == []
    path = tmp_path / "interfaces"
    path.write_text(eni)
    proc = subprocess.run(["ifup", "--no-act", "-i", str(path), "--all", "--state-dir", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_leftover_is_reported_in_the_boot_report(tmp_path):
    """The local stage's network job carries the warnings to the status (not only the log)."""
    from cloudseed.core.root import TargetRoot
    from cloudseed.network.apply import apply_network

    top = tmp_path / "root"
    for d in ("etc/network/interfaces.d", "usr/sbin", "run"):
        (top / d).mkdir(parents=True)
    (top / "etc/network/interfaces").write_text("source /etc/network/interfaces.d/*\n")
    for tool in ("ifup", "ifdown", "ifquery"):
        (top / "usr/sbin" / tool).write_text("#!/bin/sh\n")
        (top / "usr/sbin" / tool).chmod(0o755)
    report = apply_network(TargetRoot(str(top)), system_cfg={"network": DHCP6_METRIC}, datasource_config=None,
                           cmdline="", distro="debian", new_instance=True, bring_up=False)
    assert report["applied"] and report["renderer"] == "eni" and report["errors"] == []
    assert report["warnings"] == ["interface 'eth0' (ethernets.eth0): the eni renderer cannot express "
                                  "dhcp6-overrides route-metric; rendered without it"]
    assert "iface eth0 inet6 dhcp" in (top / "etc/network/interfaces.d/50-cloudseed").read_text()


def test_the_local_stage_puts_what_was_left_out_in_the_status(shell_target):
    """At boot, an option the renderer could not write is a status warning (degraded), not only a log line."""
    import json

    root = shell_target
    for d in ("/etc/network/interfaces.d", "/usr/sbin"):
        root.makedirs(d)
    root.write("/etc/network/interfaces", "source /etc/network/interfaces.d/*\n")
    for tool in ("ifup", "ifdown", "ifquery"):
        root.write(f"/usr/sbin/{tool}", "#!/bin/sh\n", mode=0o755)
    root.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-net-warn\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", "#cloud-config\n{}\n")
    root.write("/var/lib/cloud/seed/nocloud/network-config",
               "version: 2\nethernets:\n  eth0:\n    dhcp6: true\n    dhcp6-overrides: {route-metric: 50}\n")
    from cloudseed.agent.boot.stages import Agent

    Agent(root).run_local()
    status = json.loads(root.read_text("/run/cloudseed/status.json"))
    assert "network: interface 'eth0' (ethernets.eth0): the eni renderer cannot express dhcp6-overrides " \
           "route-metric; rendered without it" in status["v1"]["init-local"]["warnings"]


# ---------------------------------------------------------------- netplan keys the model has no field for
NETPLAN_KEYS = {"version": 2, "ethernets": {"eth0": {
    "match": {"name": "eth0"}, "macaddress": "02:00:00:ab:cd:ef", "dhcp4": True, "dhcp-identifier": "mac",
    "link-local": [], "ipv6-privacy": True, "critical": True,
    "routing-policy": [{"from": "10.0.2.15", "table": 101}]}}}


@pytest.mark.parametrize("renderer", ALL)
def test_netplan_keys_are_written_by_netplan_and_named_by_the_others(renderer):
    """cloud-init hands v2 to netplan as it is, and its other renderers drop these keys silently: the
    netplan renderer writes them as given, every other one renders the rest and names each key."""
    files, warnings = rendered(NETPLAN_KEYS, renderer)
    keys = ("macaddress", "dhcp-identifier", "link-local", "ipv6-privacy", "critical", "routing-policy")
    if renderer == "netplan":
        eth0 = yaml.safe_load(files["/etc/netplan/50-cloudseed.yaml"])["network"]["ethernets"]["eth0"]
        assert {k: eth0[k] for k in keys} == {k: NETPLAN_KEYS["ethernets"]["eth0"][k] for k in keys}
        assert warnings == []
    else:
        assert "eth0" in "".join(files.values())
        assert sorted(w.split("netplan's ", 1)[1].split(";")[0] for w in warnings) == sorted(keys)
        assert all(f"the {renderer} renderer cannot express" in w for w in warnings)


def test_v1_keep_configuration_is_netplans_critical():
    cfg = {"version": 1, "config": [{"type": "physical", "name": "eth0", "keep_configuration": True,
                                     "subnets": [{"type": "dhcp"}]}]}
    files, warnings = rendered(cfg, "netplan")
    assert yaml.safe_load(files["/etc/netplan/50-cloudseed.yaml"])["network"]["ethernets"]["eth0"]["critical"]
    assert rendered(cfg, "networkd")[1] == [
        "interface 'eth0' (config[0]): the networkd renderer cannot express netplan's critical; rendered without it"]
