"""timezone: the zone link and /etc/timezone in Debian and RHEL roots; unknown zones change nothing.
"""

from __future__ import annotations

import os

import pytest

from tests.agent.modules.module_support import run


def zoneinfo(root, name="Europe/Paris"):
    root.write(f"/usr/share/zoneinfo/{name}", b"TZif2 fake zone data")


def test_timezone_debian(target):
    zoneinfo(target)
    result, _ = run(target, "timezone", {"timezone": "Europe/Paris"})
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/timezone") == "Europe/Paris\n"
    assert os.readlink(target.path_nofollow("/etc/localtime")) == "/usr/share/zoneinfo/Europe/Paris"


def test_timezone_rhel_relative_link(rhel_target):
    zoneinfo(rhel_target)
    run(rhel_target, "timezone", {"timezone": "Europe/Paris"})
    assert os.readlink(rhel_target.path_nofollow("/etc/localtime")) == "../usr/share/zoneinfo/Europe/Paris"
    assert not rhel_target.exists("/etc/timezone")


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", ""])
def test_unknown_timezone_named_and_nothing_changed(any_target, zone):
    any_target.symlink("/usr/share/zoneinfo/UTC", "/etc/localtime")
    result, _ = run(any_target, "timezone", {"timezone": zone or " "})
    assert result.status == "failed" and result.reason.startswith("timezone:")
    assert os.readlink(any_target.path_nofollow("/etc/localtime")) == "/usr/share/zoneinfo/UTC"
    assert not any_target.exists("/etc/timezone")
