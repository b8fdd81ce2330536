"""ubuntu_autoinstall: the installer snap must be there and the section must have its version."""

from __future__ import annotations

from tests.agent.modules.module_support import run

UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
SNAP_LIST = ("Name       Version  Rev    Tracking       Publisher   Notes\n"
             "subiquity  24.04.1  5857   latest/stable  canonical✓  classic\n")


def _snap(root, listing: str) -> None:
    root.makedirs("/usr/bin")
    root.write("/usr/bin/snap", f"#!/bin/sh\ncat <<'EOF'\n{listing}EOF\n", mode=0o755)


def test_installer_present_and_version_given(shell_target):
    shell_target.write("/etc/os-release", UBUNTU)
    _snap(shell_target, SNAP_LIST)
    result, _ = run(shell_target, "ubuntu_autoinstall", {"autoinstall": {"version": 1}})
    assert result.status == "ok", result.reason


def test_no_installer_is_a_clear_failure(shell_target):
    shell_target.write("/etc/os-release", UBUNTU)
    _snap(shell_target, "Name  Version  Rev  Tracking  Publisher  Notes\n"
                        "core22  20240111  1122  latest/stable  canonical  base\n")
    result, _ = run(shell_target, "ubuntu_autoinstall", {"autoinstall": {"version": 1}})
    assert result.status == "failed" and "none of the installer snaps" in result.reason


def test_version_required(target):
    target.write("/etc/os-release", UBUNTU)
    result, _ = run(target, "ubuntu_autoinstall", {"autoinstall": {"identity": {}}})
    assert result.status == "failed" and "autoinstall.version: missing" in result.reason


def test_only_on_ubuntu(target):
    result, ctx = run(target, "ubuntu_autoinstall", {"autoinstall": {"version": 1}})
    assert result.status == "skipped" and "not applicable to debian" in ctx.warnings[0]
