"""cloudseed net render INPUT --renderer R --root DIR [--kind] [--distro] [--mac MAC=NAME]."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from cloudseed.cli import main
from tests.network.net_corpus import corpus_macs, path_of


@pytest.mark.parametrize("renderer,expected", [
    ("eni", ["/etc/network/interfaces.d/50-cloudseed", "/etc/udev/rules.d/70-cloudseed-net.rules"]),
    ("netplan", ["/etc/netplan/50-cloudseed.yaml"]),
    ("networkd", ["/etc/systemd/network/10-cloudseed-eth0.link", "/etc/systemd/network/10-cloudseed-eth0.network"]),
    ("sysconfig", ["/etc/sysconfig/network-scripts/ifcfg-eth0", "/etc/sysconfig/network",
                   "/etc/resolv.conf", "/etc/NetworkManager/conf.d/99-cloudseed.conf",
                   "/etc/udev/rules.d/70-cloudseed-net.rules"]),
    ("network-manager", ["/etc/NetworkManager/system-connections/cloudseed-eth0.nmconnection",
                         "/etc/udev/rules.d/70-cloudseed-net.rules"]),
])
def test_render_writes_at_system_paths(renderer, expected, tmp_path, capsys):
    rc = main(["net", "render", path_of("os-02-static.json"), "--renderer", renderer, "--root", str(tmp_path),
               "--mac", "FA:16:3E:00:00:00=eth0"])
    assert rc == 0
    assert capsys.readouterr().out.split() == expected
    for p in expected:
        assert (tmp_path / p.lstrip("/")).is_file()


def test_global_root_flag_and_kind(tmp_path, capsys):
    rc = main(["--root", str(tmp_path), "net", "render", path_of("v2-09-bond.yaml"), "-r", "networkd", "--kind", "v2"])
    assert rc == 0 and (tmp_path / "etc/systemd/network/10-cloudseed-bond0.netdev").is_file()
    rc = main(["net", "render", path_of("v2-09-bond.yaml"), "-r", "networkd", "--kind", "v1", "--root", str(tmp_path)])
    assert rc == 1 and "expected network config v1, got v2" in capsys.readouterr().err


def test_stdin_and_distro(tmp_path, monkeypatch, capsys):
    cfg = {"version": 2, "ethernets": {"eth0": {"dhcp4": True}}}
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(cfg)))
    assert main(["net", "render", "-", "-r", "sysconfig", "--distro", "rhel", "--root", str(tmp_path)]) == 0
    assert "BOOTPROTO=dhcp" in (tmp_path / "etc/sysconfig/network-scripts/ifcfg-eth0").read_text()


def test_unknown_mac_without_map(tmp_path, capsys):
    assert main(["net", "render", path_of("os-01-dhcp.json"), "-r", "eni", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "links[0].ethernet_mac_address: no network interface has MAC fa:16:3e:00:00:00" in err
    assert not os.listdir(tmp_path)


def test_usage_errors(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 2\nethernets: [\n")
    assert main(["net", "render", str(bad), "-r", "eni", "--root", str(tmp_path / "o")]) == 1
    assert "not valid YAML or JSON (line 3" in capsys.readouterr().err
    assert main(["net", "render", str(bad), "-r", "eni"]) == 1
    assert "give --root DIR" in capsys.readouterr().err
    assert main(["net", "render", path_of("v1-01-dhcp-single.yaml"), "-r", "eni", "--root", str(tmp_path),
                 "--mac", "eth0"]) == 1
    assert "expected MAC=NAME" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["net", "render", path_of("v1-01-dhcp-single.yaml"), "-r", "ifcfg", "--root", str(tmp_path)])


def test_console_script(tmp_path):
    macs = [a for mac, name in corpus_macs().items() for a in ("--mac", f"{mac}={name}")]
    exe = os.path.join(os.path.dirname(sys.executable), "cloudseed")
    argv = [exe] if os.path.exists(exe) else [sys.executable, "-m", "cloudseed"]
    proc = subprocess.run(argv + ["net", "render", path_of("os-12-bond-vlan.json"), "--renderer", "netplan",
                                  "--root", str(tmp_path), *macs], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "/etc/netplan/50-cloudseed.yaml"
