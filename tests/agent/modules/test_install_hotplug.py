"""install_hotplug and ``cloudseed hotplug-hook``: the udev rule and hook, and what a hot-plugged NIC gets.

The module is run through the framework in temporary roots (``udevadm`` is a recording stand-in:
udev's daemon is not running in a temporary root). The hook script is run by a chrooted busybox
shell with the environment udev gives it (ACTION, DEVPATH, SUBSYSTEM), against a recording
``cloudseed`` stand-in. The verb is run as a real process: once with a recorded udev event
against a root whose sysfs is a plain directory, and once with a real veth pair created in a
network namespace whose own sysfs is mounted into the temporary root, so the device the verb
finds by MAC is a real kernel device. Bringing the device up needs the live root (``--root /``),
which a test must not reconfigure: only the files written are checked.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import uuid

import pytest

from tests.agent.modules.module_support import InputDatasource, run

RULE = "/etc/udev/rules.d/90-cloudseed-hook-hotplug.rules"
HOOK = "/usr/lib/cloudseed/hook-hotplug"
HOTPLUG = {"updates": {"network": {"when": ["boot", "hotplug"]}}}
OPENSTACK = InputDatasource(name="OpenStack")


def _udevadm(root) -> None:
    root.makedirs("/usr/bin")
    root.write("/usr/bin/udevadm", "#!/bin/sh\nexit 0\n", mode=0o755)


def test_rule_and_hook_installed(target):
    _udevadm(target)
    result, _ = run(target, "install_hotplug", HOTPLUG, datasource=OPENSTACK, stage="final")
    assert result.status == "ok", result.reason
    rule = target.read_text(RULE)
    assert 'ACTION!="add|remove", GOTO="cloudseed_hotplug_end"' in rule
    assert f'SUBSYSTEM=="net", RUN+="{HOOK}"' in rule
    assert target.stat(RULE).st_mode & 0o777 == 0o644
    assert target.stat(HOOK).st_mode & 0o777 == 0o755


def test_hook_hands_the_udev_event_to_the_verb(shell_target):
    _udevadm(shell_target)
    run(shell_target, "install_hotplug", HOTPLUG, datasource=OPENSTACK, stage="final")
    shell_target.makedirs("/var/log")
    shell_target.makedirs("/dev")
    os.mknod(shell_target.path("/dev/null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # the hook redirects to it
    shell_target.write("/usr/bin/cloudseed", '#!/bin/sh\necho "cloudseed $*" > /var/log/hook.log\n', mode=0o755)
    env = {"ACTION": "add", "DEVPATH": "/devices/pci0000:00/0000:00:05.0/virtio2/net/ens5", "SUBSYSTEM": "net",
           "PATH": "/usr/bin:/bin"}
    assert shell_target.run([HOOK], env=env).returncode == 0
    deadline = time.monotonic() + 10  # without systemd the hook runs the verb in the background
    while not shell_target.exists("/var/log/hook.log") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert shell_target.read_text("/var/log/hook.log") == (
        "cloudseed hotplug-hook --subsystem net handle --devpath "
        "/devices/pci0000:00/0000:00:05.0/virtio2/net/ens5 --udevaction add\n")


def test_not_wanted_removes_an_earlier_rule(target):
    _udevadm(target)
    run(target, "install_hotplug", HOTPLUG, datasource=OPENSTACK, stage="final")
    result, ctx = run(target, "install_hotplug", {"updates": {"network": {"when": ["boot"]}}},
                      datasource=OPENSTACK, stage="final")
    assert result.status == "ok" and not ctx.warnings
    assert not target.exists(RULE) and not target.exists(HOOK)


def test_datasource_without_hotplug_is_a_warning(target):
    _udevadm(target)
    result, ctx = run(target, "install_hotplug", HOTPLUG, datasource=InputDatasource(name="NoCloud"), stage="final")
    assert result.status == "ok"
    assert ctx.warnings == ["install_hotplug: updates.network.when: hotplug not set up: the NoCloud datasource "
                            "does not describe network devices added after boot"]
    assert not target.exists(RULE)


def test_no_udev_is_a_clear_failure(target):
    result, _ = run(target, "install_hotplug", HOTPLUG, datasource=OPENSTACK, stage="final")
    assert result.status == "failed" and "udevadm is not on the target (install udev)" in result.reason


def test_wrong_type(target):
    result, _ = run(target, "install_hotplug", {"updates": {"network": {"when": "hotplug"}}},
                    datasource=OPENSTACK, stage="final")
    assert result.status == "failed" and "updates.network.when: expected array" in result.reason
    result, _ = run(target, "install_hotplug", {"updates": {"network": {"when": ["sometimes"]}}},
                    datasource=OPENSTACK, stage="final")
    assert result.status == "failed" and "updates.network.when[0]" in result.reason


# ---------------------------------------------------------------- the verb
def _instance_root(root, network_config: dict) -> None:
    """A root where the agent ran: ENI renderer tools, the rule, and the cached datasource."""
    from cloudseed.agent.state import Paths

    for tool in ("ifup", "ifdown", "ifquery"):
        root.makedirs("/sbin")
        root.write(f"/sbin/{tool}", "#!/bin/sh\nexit 0\n", mode=0o755)
    root.makedirs("/etc/network/interfaces.d")
    root.write("/etc/network/interfaces", "source /etc/network/interfaces.d/*\n")
    root.makedirs("/etc/udev/rules.d")
    root.write(RULE, "# test\n")
    cache = {"format": 1, "name": "OpenStack", "metadata": {"instance-id": "i-hotplug"},
             "network_config": network_config}
    root.write(Paths(root).boot_datasource_file, json.dumps(cache), mode=0o600)


def _verb(root_dir: str, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    argv = [*prefix, sys.executable, "-m", "cloudseed", "--root", root_dir, "hotplug-hook", "--subsystem", "net", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def _fake_nic(root, name: str, mac: str) -> None:
    root.makedirs(f"/sys/class/net/{name}")
    root.write(f"/sys/class/net/{name}/address", mac + "\n")
    root.write(f"/sys/class/net/{name}/type", "1\n")
    root.write(f"/sys/class/net/{name}/uevent", f"INTERFACE={name}\n")


def test_verb_renders_the_config_for_a_recorded_udev_event(target):
    config = {"version": 2, "ethernets": {
        "eth0": {"match": {"macaddress": "52:54:00:00:00:01"}, "set-name": "eth0", "dhcp4": True},
        "eth1": {"match": {"macaddress": "52:54:00:00:00:02"}, "set-name": "eth1",
                 "addresses": ["192.0.2.10/24"]}}}
    _instance_root(target, config)
    _fake_nic(target, "eth0", "52:54:00:00:00:01")
    _fake_nic(target, "eth1", "52:54:00:00:00:02")
    proc = _verb(target.top, "handle", "--devpath", "/devices/pci0000:00/0000:00:04.0/virtio1/net/eth1",
                 "--udevaction", "add", "--cached")
    assert proc.returncode == 0, proc.stderr
    assert "eth1 add: network config from datasource written by eni" in proc.stdout
    eni = target.read_text("/etc/network/interfaces.d/50-cloudseed")
    assert "iface eth1 inet static" in eni and "192.0.2.10/24" in eni


def test_verb_does_nothing_without_the_rule(target):
    _instance_root(target, {"version": 2, "ethernets": {"eth0": {"dhcp4": True}}})
    target.remove(RULE)
    proc = _verb(target.top, "handle", "--devpath", "/devices/virtual/net/eth9", "--udevaction", "add", "--cached")
    assert proc.returncode == 0 and "hotplug is not enabled" in proc.stdout
    assert not target.exists("/etc/network/interfaces.d/50-cloudseed")
    assert _verb(target.top, "query").stdout.strip() == "disabled"


def test_verb_without_a_cached_datasource_fails_clearly(target):
    target.makedirs("/etc/udev/rules.d")
    target.write(RULE, "# test\n")
    proc = _verb(target.top, "handle", "--devpath", "/devices/virtual/net/eth1", "--udevaction", "add", "--cached")
    assert proc.returncode == 1 and "no cached datasource" in proc.stderr


def test_verb_with_a_real_veth_in_a_namespace(target):
    if os.geteuid() != 0 or subprocess.run(["ip", "-V"], capture_output=True).returncode != 0:
        pytest.skip("needs root and iproute2 for a network namespace")
    ns = f"cs-hp-{uuid.uuid4().hex[:8]}"
    mac = "02:cd:ee:00:11:22"
    config = {"version": 2, "ethernets": {"hot0": {"match": {"macaddress": mac}, "set-name": "hot0",
                                                   "addresses": ["198.51.100.7/24"]}}}
    _instance_root(target, config)
    target.makedirs("/sys")
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        ip = ["ip", "-n", ns, "link"]
        subprocess.run([*ip, "add", "hot0", "address", mac, "type", "veth", "peer", "name", "hot0peer"], check=True)
        # the verb runs in the namespace with that namespace's own sysfs mounted as the root's /sys
        script = f'mount -t sysfs sysfs "{target.top}/sys" && exec "$@"'
        proc = _verb(target.top, "handle", "--devpath", "/devices/virtual/net/hot0", "--udevaction", "add", "--cached",
                     prefix=("ip", "netns", "exec", ns, "sh", "-c", script, "sh"))
    finally:
        subprocess.run(["ip", "netns", "delete", ns], check=False)
    assert proc.returncode == 0, proc.stderr
    assert "hot0 add: network config from datasource written by eni" in proc.stdout
    assert "is not in it" not in proc.stdout
    eni = target.read_text("/etc/network/interfaces.d/50-cloudseed")
    assert "iface hot0 inet static" in eni and "198.51.100.7/24" in eni
    rules = target.read_text("/etc/udev/rules.d/70-cloudseed-net.rules")
    assert mac in rules and 'NAME="hot0"' in rules


class _Metadata:
    """An OpenStack metadata service on loopback serving fixed documents (path -> bytes)."""

    def __init__(self, files: dict[str, bytes]):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = files.get(self.path.rstrip("/"))
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_verb_reads_the_metadata_service_again_for_a_nic_attached_after_boot(target):
    """The cache (from boot) knows eth0 only; the service now also describes the attached NIC."""
    from cloudseed.agent.state import Paths

    eth0 = {"id": "tap0", "type": "phy", "ethernet_mac_address": "fa:16:3e:00:00:01"}
    eth1 = {"id": "tap1", "type": "phy", "ethernet_mac_address": "fa:16:3e:00:00:02"}
    net0 = {"id": "n0", "link": "tap0", "type": "ipv4_dhcp"}
    net1 = {"id": "n1", "link": "tap1", "type": "ipv4", "ip_address": "203.0.113.9", "netmask": "255.255.255.0"}
    at_boot = {"links": [eth0], "networks": [net0]}
    now = {"links": [eth0, eth1], "networks": [net0, net1]}
    meta = {"uuid": "i-hotplug", "hostname": "web1"}
    service = _Metadata({"/openstack": b"2018-08-27\nlatest\n",
                         "/openstack/2018-08-27/meta_data.json": json.dumps(meta).encode(),
                         "/openstack/2018-08-27/network_data.json": json.dumps(now).encode()})
    try:
        _instance_root(target, at_boot)
        target.write("/etc/cloudseed/cloud.cfg.d/50-openstack.cfg",
                     f"datasource:\n  OpenStack:\n    metadata_urls: [{service.url}]\n    max_wait: 2\n")
        _fake_nic(target, "eth0", "fa:16:3e:00:00:01")
        _fake_nic(target, "eth1", "fa:16:3e:00:00:02")
        proc = _verb(target.top, "handle", "--devpath", "/devices/virtual/net/eth1", "--udevaction", "add")
    finally:
        service.close()
    assert proc.returncode == 0, proc.stderr
    assert "eth1 is not in it" not in proc.stdout
    eni = target.read_text("/etc/network/interfaces.d/50-cloudseed")
    assert "iface eth1 inet static" in eni and "203.0.113.9" in eni
    cache = json.loads(target.read_text(Paths(target).boot_datasource_file))
    assert cache["network_config"] == now  # the refreshed record replaced the cache
    # the service gone: the cache (now with eth1) is used, and the run still succeeds
    proc = _verb(target.top, "handle", "--devpath", "/devices/virtual/net/eth1", "--udevaction", "add")
    assert proc.returncode == 0, proc.stderr
    assert "did not answer; using the cached metadata" in proc.stderr


# ---------------------------------------------------------------- cloud-init 24.1-25.3: enable, query, per cloud
@pytest.mark.parametrize("name, device_filter", [
    ("Ec2", 'ENV{ID_NET_DRIVER}=="vif|ena|ixgbevf", GOTO="cloudseed_hotplug_hook"'),
    ("Hetzner", 'ATTR{address}=="86:*", GOTO="cloudseed_hotplug_hook"'),
    ("VMware", 'ENV{ID_NET_DRIVER}=="e1000|e1000e|vlance|vmxnet2|vmxnet3|vrdma", GOTO="cloudseed_hotplug_hook"'),
])
def test_clouds_with_hotplug_filter_their_own_devices(target, name, device_filter):
    _udevadm(target)
    result, _ = run(target, "install_hotplug", HOTPLUG, datasource=InputDatasource(name=name), stage="final")
    assert result.status == "ok", result.reason
    lines = target.read_text(RULE).splitlines()
    at = lines.index(device_filter)
    # the filter jumps to the hook; everything else skips to the end
    assert lines[at + 1:at + 5] == ['GOTO="cloudseed_hotplug_end"', 'LABEL="cloudseed_hotplug_hook"',
                                    f'SUBSYSTEM=="net", RUN+="{HOOK}"', 'LABEL="cloudseed_hotplug_end"']


def test_openstack_rule_has_no_device_filter(target):
    _udevadm(target)
    run(target, "install_hotplug", HOTPLUG, datasource=OPENSTACK, stage="final")
    assert "cloudseed_hotplug_hook" not in target.read_text(RULE)


def _cached_only(root, name: str = "OpenStack") -> None:
    from cloudseed.agent.state import Paths

    cache = {"format": 1, "name": name, "metadata": {"instance-id": "i-enable"}, "network_config": None}
    root.write(Paths(root).boot_datasource_file, json.dumps(cache), mode=0o600)


def test_enable_installs_the_rule_and_is_kept_at_later_boots(target):
    _udevadm(target)
    _cached_only(target)
    assert _verb(target.top, "query").stdout.strip() == "disabled"
    proc = _verb(target.top, "enable")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Enabled cloud-init hotplug for subsystem=net"
    assert json.loads(target.read_text("/var/lib/cloudseed/hotplug.enabled")) == {"scopes": ["network"]}
    assert target.stat("/var/lib/cloudseed/hotplug.enabled").st_mode & 0o777 == 0o640
    assert target.exists(RULE) and target.exists(HOOK)
    assert _verb(target.top, "query").stdout.strip() == "enabled"
    again = _verb(target.top, "enable")
    assert again.returncode == 0 and "Already done" in again.stderr
    # a later boot without updates.network.when in user-data keeps what enable asked for
    result, ctx = run(target, "install_hotplug", {}, datasource=OPENSTACK, stage="final")
    assert result.status == "ok" and target.exists(RULE) and not ctx.warnings


def test_enable_refuses_a_datasource_without_hotplug_and_query_without_one(target):
    _udevadm(target)
    assert _verb(target.top, "query").stdout.strip() == "Unable to determine hotplug state. No datasource detected"
    _cached_only(target, "NoCloud")
    proc = _verb(target.top, "enable")
    assert proc.returncode == 1 and "hotplug not supported for event of net" in proc.stderr
    assert not target.exists(RULE) and not target.exists("/var/lib/cloudseed/hotplug.enabled")
