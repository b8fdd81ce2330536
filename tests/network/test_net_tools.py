"""The real tools accept what we render: netplan generate, ifup --no-act, systemd-networkd.

netplan.io and ifupdown are installed by scripts/setup.sh. systemd-networkd has no offline
validator (systemd-analyze verify only reads units), so we start the real daemon in a private
network and mount namespace with our files and read its complaints: it reports every unknown
key, section or invalid value with the file name as it loads them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from cloudseed.network import parse, render
from tests.network.net_corpus import cases, load, macs_for

NETWORKD = next((p for p in ("/lib/systemd/systemd-networkd", "/usr/lib/systemd/systemd-networkd")
                 if os.path.exists(p)), None)


# features the corpus (shared with cloud-init) does not cover, checked against the real tools too
EXTRA = {
    "extra-glob-driver": {"version": 2, "ethernets": {
        "all-en": {"match": {"name": "en*"}, "dhcp4": True},
        "fast": {"match": {"driver": "ixgbe", "macaddress": "52:54:00:00:10:01"}, "set-name": "fast0",
                 "wakeonlan": True, "dhcp6": True, "dhcp6-overrides": {"use-dns": False}}}},
    "extra-overrides-manual": {"version": 2, "ethernets": {
        "eth0": {"dhcp4": True, "dhcp4-overrides": {"use-dns": False, "use-routes": False, "route-metric": 5,
                                                    "hostname": "box", "send-hostname": True}},
        "eth1": {"addresses": ["10.3.0.2/24"], "optional": True, "routes": [
            {"to": "10.4.0.0/16", "via": "10.3.0.1", "table": 100, "on-link": True}]}}},
    "extra-v1-control-mtu6": {"version": 1, "config": [
        {"type": "physical", "name": "eth0", "mac_address": "52:54:00:00:10:02", "subnets": [
            {"type": "static", "address": "10.8.0.2/24", "control": "manual", "mtu": 1400},
            {"type": "static6", "address": "2001:db8:8::2/64", "mtu": 1380}]},
        {"type": "physical", "name": "eth1", "subnets": [{"type": "ipv6_dhcpv6-stateless"}]}]},
    "extra-bridge-ports": {"version": 1, "config": [
        {"type": "physical", "name": "eth0"}, {"type": "physical", "name": "eth1"},
        {"type": "bridge", "name": "br0", "bridge_interfaces": ["eth0", "eth1"],
         "params": {"bridge_pathcost": ["eth0 10", "eth1 20"], "bridge_portprio": ["eth0 5"],
                    "bridge_hello": 2, "bridge_maxage": 12, "bridge_stp": "on"},
         "subnets": [{"type": "dhcp"}]}]},
}
CASES = cases() + sorted(EXTRA)


def _model(case):
    if case in EXTRA:
        return parse(EXTRA[case], macs={})
    return parse(load(case), macs=macs_for(case))


def _render(case, renderer):
    from cloudseed.network import NetworkConfigError

    try:
        return render(_model(case), renderer)
    except NetworkConfigError as e:
        if case in EXTRA:
            pytest.skip(f"{renderer} refuses {case}: {e}")
        raise


@pytest.mark.skipif(not shutil.which("netplan"), reason="netplan.io not installed")
@pytest.mark.parametrize("case", CASES)
def test_netplan_generate_accepts(case, tmp_path):
    files = _render(case, "netplan")
    for f in files:
        path = tmp_path / f.path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f.content)
        path.chmod(f.mode)
    proc = subprocess.run(["netplan", "generate", "--root-dir", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "", f"netplan warned:\n{proc.stderr}"
    generated = list((tmp_path / "run").rglob("*"))
    assert any(p.suffix in (".network", ".nmconnection") for p in generated), "netplan generated nothing"


@pytest.mark.skipif(not shutil.which("ifup"), reason="ifupdown not installed")
@pytest.mark.parametrize("case", CASES)
def test_ifup_accepts(case, tmp_path):
    files = _render(case, "eni")
    eni = tmp_path / "interfaces"
    eni.write_text(files[0].content)
    proc = subprocess.run(["ifup", "--no-act", "-v", "-i", str(eni), "-a"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "ifup:" not in proc.stderr.replace("ifup: configuring", ""), proc.stderr
    # and beside Debian's default /etc/network/interfaces, which also defines lo
    main = tmp_path / "main"
    main.write_text(f"source {eni}\nauto lo\niface lo inet loopback\n")
    proc = subprocess.run(["ifup", "--no-act", "-i", str(main), "-a"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _networkd_complaints(file_sets: list) -> dict:
    """Run systemd-networkd once per group of cases; return {file name: [complaints]}."""
    if os.geteuid() != 0 or NETWORKD is None or not shutil.which("unshare"):
        pytest.skip("needs root, unshare and systemd-networkd")
    # cases that create the same device cannot share one daemon: group them
    groups: list = []
    for name, files in file_sets:
        devices = {os.path.basename(f.path) for f in files if f.path.endswith(".netdev")}
        for g in groups:
            if not (g["devices"] & devices):
                g["devices"] |= devices
                g["cases"].append((name, files))
                break
        else:
            groups.append({"devices": set(devices), "cases": [(name, files)]})
    complaints: dict = {}
    procs = []
    tmpdirs = []
    for g in groups:
        d = tempfile.mkdtemp(prefix="networkd-check-")
        tmpdirs.append(d)
        for name, files in g["cases"]:
            for f in files:
                base = os.path.basename(f.path).replace("10-cloudseed-", f"10-{name}--")
                with open(os.path.join(d, base), "w") as out:
                    out.write(f.content)
        script = (f"mount -t tmpfs tmpfs /etc/systemd/network && cp {d}/* /etc/systemd/network/ && "
                  f"mount -t tmpfs tmpfs /run/systemd && exec timeout 3 {NETWORKD}")
        procs.append(subprocess.Popen(["unshare", "--net", "--mount", "--fork", "sh", "-c", script],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        for p in procs:
            out, _ = p.communicate(timeout=60)
            for line in out.splitlines():
                if "/etc/systemd/network/" not in line or "Device was already configured" in line:
                    continue
                fn = line.split("/etc/systemd/network/", 1)[1].split(":", 1)[0]
                complaints.setdefault(fn, []).append(line)
    finally:
        for d in tmpdirs:
            shutil.rmtree(d, ignore_errors=True)
    return complaints


@pytest.mark.root
def test_networkd_accepts_every_corpus_case():
    from cloudseed.network.renderers._common import RenderedFile

    sets = [(case.split(".")[0], render(_model(case), "networkd")) for case in CASES]
    # a canary proves the daemon's complaints reach us
    canary = [RenderedFile("/etc/systemd/network/10-cloudseed-canary.network",
                           "[Match]\nName=canary0\n[Network]\nBogusKey=1\nAddress=notanip\n")]
    complaints = _networkd_complaints(sets + [("canary", canary)])
    assert any("canary" in fn for fn in complaints), "systemd-networkd reported nothing, even for the canary"
    ours = {fn: lines for fn, lines in complaints.items() if "canary" not in fn}
    assert not ours, "\n".join(line for lines in ours.values() for line in lines)


# netplan's own systemd-networkd output: defaults it always writes, which ours leaves to networkd
_NETPLAN_DEFAULTS = {("Network", "LinkLocalAddressing"), ("Network", "ConfigureWithoutCarrier"),
                     ("DHCPv4", "UseMTU"), ("Link", "WakeOnLan")}


@pytest.mark.skipif(not shutil.which("netplan"), reason="netplan.io not installed")
@pytest.mark.parametrize("case", cases())
def test_networkd_means_what_netplan_generates(case, tmp_path):
    """An independent implementation of the same mapping: netplan generate, fed our netplan output,
    writes systemd-networkd files; ours must mean the same (cloud-init writes no .netdev/.link
    files to compare ours with)."""
    from tests.network.net_semantic import facts_networkd, load_tree

    model = _model(case)
    for f in render(model, "netplan"):
        path = tmp_path / f.path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f.content)
        path.chmod(f.mode)
    subprocess.run(["netplan", "generate", "--root-dir", str(tmp_path)], check=True, capture_output=True)
    generated = {p.replace("/run/systemd/network/", "/etc/systemd/network/"): text
                 for p, text in load_tree(str(tmp_path)).items() if p.startswith("/run/systemd/network/")}

    def meaning(facts):
        out = set()
        for f in facts:
            if f[0] == "opt" and (f[2], f[3]) in _NETPLAN_DEFAULTS:
                continue
            if f[0] == "link" and (f[1], f[2]) in _NETPLAN_DEFAULTS:
                continue
            if f[0] == "opt" and f[2:] == ("DHCPv4", "RouteMetric", "100"):
                continue                # netplan's default metric for DHCP routes, networkd's is 1024
            out.add(f)
        return out

    ours = meaning(facts_networkd({f.path: f.content for f in render(model, "networkd")}))
    theirs = meaning(facts_networkd(generated))
    assert ours == theirs, \
        f"only ours: {sorted(ours - theirs, key=str)}\nonly netplan's: {sorted(theirs - ours, key=str)}"


_LINK_KEYS = {"Match": {"MACAddress", "PermanentMACAddress", "Driver", "OriginalName"},
              "Link": {"Name", "WakeOnLan", "MTUBytes"}}


@pytest.mark.parametrize("case", CASES)
def test_link_files_use_known_keys(case):
    """udev (which reads .link files) is not installed here: check the keys against systemd.link(5)."""
    for f in _render(case, "networkd"):
        if not f.path.endswith(".link"):
            continue
        section = None
        for line in f.content.splitlines():
            if not line or line.startswith("#"):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                assert section in _LINK_KEYS, line
            else:
                assert line.split("=", 1)[0] in _LINK_KEYS[section], line
