"""byobu: which parts each value touches, and a real run as the default user in a Debian chroot.

byobu itself is not in the cached chroot; the launcher scripts placed there record who ran them
and with which HOME, which is the part this module is responsible for (runuser, environment).
"""

from __future__ import annotations

import pytest

from cloudseed.agent.modules.byobu import plan
from tests.agent.modules.module_support import run


@pytest.mark.parametrize("value,expected", [
    ("enable-user", (True, True, True)), ("user", (True, True, True)),
    ("enable-system", (True, False, True)), ("system", (True, False, True)), ("enable", (True, False, True)),
    ("disable-user", (False, True, False)), ("disable-system", (False, False, True)),
    ("disable", (False, True, True)),
])
def test_plan_matches_cloud_inits_reading_of_each_value(value, expected):
    assert plan(value) == expected


def test_unknown_value_is_named_with_the_valid_ones(target):
    result, _ = run(target, "byobu", {"byobu_by_default": "sometimes"})
    assert result.status == "failed"
    assert result.reason.startswith("byobu_by_default: expected one of enable-user, enable-system")


def test_byobu_missing_from_the_image_is_said_plainly(target):
    result, _ = run(target, "byobu", {"byobu_by_default": "enable-user"})
    assert result.status == "failed" and "byobu is not installed in the image" in result.reason


def test_launcher_runs_as_the_default_user_with_its_home(debian_root):
    root = debian_root
    root.run(["useradd", "-m", "-s", "/bin/bash", "debian"])
    for name in ("byobu", "byobu-launcher-install"):
        root.write(f"/usr/bin/{name}", '#!/bin/sh\nid -un > "$HOME/.byobu-ran"\necho "$HOME" >> "$HOME/.byobu-ran"\n',
                   mode=0o755)
    result, _ = run(root, "byobu", {"byobu_by_default": "enable-user", "users": ["default"],
                                    "system_info": {"default_user": {"name": "debian"}}})
    # the user part ran for real; the system part fails because the byobu package is not installed
    assert root.read_text("/home/debian/.byobu-ran") == "debian\n/home/debian\n"
    assert root.stat("/home/debian/.byobu-ran").st_uid == root.lookup_uid("debian")
    assert result.status == "failed" and "setting byobu system-wide" in result.reason
    # debconf really holds the answer
    assert "Name: byobu/launch-by-default\nTemplate: byobu/launch-by-default\nValue: true" in \
        root.read_text("/var/cache/debconf/config.dat")
