"""The package manager registry and the apt command line, checked without running a package manager."""

from __future__ import annotations

import pytest

from cloudseed.agent import package_managers
from cloudseed.agent.package_managers.base import PackageError, failure_reason


def test_settings_system_info_wins_over_the_top_level():
    cfg = {"apt_get_upgrade_subcommand": "upgrade", "apt_get_command": ["apt-get", "-y"],
           "system_info": {"apt_get_upgrade_subcommand": "full-upgrade", "package_lock_timeout": 5}}
    assert package_managers.settings_from(cfg) == {
        "apt_get_upgrade_subcommand": "full-upgrade", "apt_get_command": ["apt-get", "-y"], "package_lock_timeout": 5}


def test_registry_names(target):
    assert package_managers.get("apt", target).tool == "apt-get"
    assert package_managers.get("yum", target).name == "dnf"
    assert package_managers.get("snap", target).name == "snap"
    with pytest.raises(KeyError):
        package_managers.get("pip", target)


def test_apt_command_line_and_wrapper_modes(target):
    apt = package_managers.get("apt", target)
    assert apt.command("install", ["a=1"]) == [
        "apt-get", "--option=Dpkg::Options::=--force-confold", "--option=Dpkg::options::=--force-unsafe-io",
        "--assume-yes", "--quiet", "install", "a=1"]  # eatmydata is not in this root: auto leaves it out
    target.write("/usr/bin/eatmydata", "#!/bin/sh\nexec \"$@\"\n", mode=0o755)
    assert package_managers.get("apt", target).command("update")[0] == "eatmydata"
    never = package_managers.get("apt", target, {"apt_get_wrapper": {"command": "eatmydata", "enabled": False}})
    assert never.command("update")[0] == "apt-get"
    forced = package_managers.get("apt", target, {"apt_get_wrapper": {"command": ["nice", "-n5"], "enabled": "true"}})
    assert forced.command("update")[:3] == ["nice", "-n5", "apt-get"]
    bad = package_managers.get("apt", target, {"apt_get_wrapper": {"command": "x", "enabled": "sometimes"}})
    with pytest.raises(PackageError, match="apt_get_wrapper.enabled: expected true, false or auto"):
        bad.command("update")
    assert package_managers.get("apt", target, {"apt_get_upgrade_subcommand": "upgrade"}).upgrade_verb() == "upgrade"


def test_bad_numbers_are_named(target):
    with pytest.raises(PackageError, match="package_lock_timeout: expected a number of seconds"):
        package_managers.get("apt", target, {"package_lock_timeout": "soon"})
    with pytest.raises(PackageError, match="package_retries: expected a whole number >= 0"):
        package_managers.get("apt", target, {"package_retries": -1})


def test_failure_reason_prefers_the_error_line():
    out = "Reading package lists...\nBuilding dependency tree...\n"
    err = "W: something\nE: Unable to locate package nosuchpkg\n"
    assert failure_reason(out, err, 100) == "E: Unable to locate package nosuchpkg"
    assert failure_reason("", "", 3) == "exit status 3"
    assert failure_reason("last words\n", "", 1) == "last words"
