"""A distro is one file: the os-release IDs it serves and its network renderer order are declared there.

The registry (``cloudseed.agent.distros``) finds the family from ``/etc/os-release`` through
those declarations, and the local stage hands the family's renderer order to the network layer.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cloudseed.agent.distros import distro_class, distro_names, families, family_named, family_of, get_distro

RHEL_TOOLS = ("/usr/sbin/ifup", "/etc/sysconfig/network-scripts/network-functions", "/usr/sbin/NetworkManager")


@pytest.mark.parametrize("os_release,family", [
    ({"ID": "debian"}, "debian"),
    ({"ID": "ubuntu", "ID_LIKE": "debian"}, "debian"),
    ({"ID": "linuxmint", "ID_LIKE": "ubuntu debian"}, "debian"),
    ({"ID": "rocky", "ID_LIKE": "rhel centos fedora"}, "rhel"),
    ({"ID": "almalinux"}, "rhel"),
    ({"ID": "someday-linux", "ID_LIKE": "fedora"}, "rhel"),  # an unknown ID, a known ID_LIKE word
    ({"ID": "plan9"}, "debian"),  # nothing known: the default family
])
def test_family_from_os_release(os_release, family):
    found = family_of(os_release)
    assert found == family
    assert found.renderers == tuple(distro_class(family).renderers) and found.renderers


def test_the_family_table_is_what_the_files_declare():
    table = families()
    for name in distro_names():
        cls = distro_class(name)
        assert table[name] == name
        for os_id in cls.os_ids:
            assert table[os_id] == name, f"{os_id} is served by {table[os_id]}, but {name}.py declares it"
    assert {"debian", "rhel"} <= set(distro_names())


def test_system_info_distro_overrides_os_release(target):
    assert get_distro(target, {}).family == "debian"
    assert get_distro(target, {"system_info": {"distro": "centos"}}).family == "rhel"
    assert get_distro(target, {"system_info": {"distro": "rhel"}}).family == "rhel"


def test_a_family_name_without_a_file_has_no_renderer_order():
    assert family_named("plan9") == "plan9" and family_named("plan9").renderers == ()


def _tool(root, inner: str) -> None:
    host = root.path(inner)
    os.makedirs(os.path.dirname(host), exist_ok=True)
    with open(host, "w") as handle:
        handle.write("#!/bin/sh\nexit 0\n")
    os.chmod(host, 0o755)


def test_the_local_stage_renders_with_the_distros_declared_order(rhel_root):
    """Rocky has both sysconfig and NetworkManager: rhel.py puts sysconfig first, so ifcfg files are written."""
    for inner in RHEL_TOOLS:
        _tool(rhel_root, inner)
    seed = "/var/lib/cloud/seed/nocloud"
    rhel_root.write(f"{seed}/meta-data", "instance-id: i-distro\n")
    rhel_root.write(f"{seed}/network-config", "version: 1\nconfig:\n  - type: physical\n    name: eth0\n"
                                              "    mac_address: '52:54:00:12:34:56'\n    subnets: [{type: dhcp}]\n")
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "--root", rhel_root.top, "init", "--local"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 2), proc.stderr
    assert rhel_root.isfile("/etc/sysconfig/network-scripts/ifcfg-eth0"), proc.stderr
    assert not rhel_root.exists("/etc/NetworkManager/system-connections/cloudseed-eth0.nmconnection")


@pytest.fixture
def rhel_root(target):
    target.write("/etc/os-release", 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n')
    return target
