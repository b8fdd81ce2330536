"""Fixtures for the per-module tests: Debian and RHEL temporary roots, the real Debian chroot.

``target`` (a Debian-like temporary root) comes from tests/conftest.py. The helpers these
tests import (``run`` a module through the real framework, ``InputDatasource``) are in
``module_support.py`` beside this file.
"""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "identity"))  # debian_chroot: the cached tree

from module_support import RHEL_OS_RELEASE  # noqa: E402  (after the sys.path line)


@pytest.fixture
def rhel_target(target):
    """The ``target`` root made into a Rocky Linux 9 system."""
    with open(target.path("/etc/os-release"), "w") as handle:
        handle.write(RHEL_OS_RELEASE)
    with open(target.path("/etc/group"), "a") as handle:
        handle.write("wheel:x:10:\nssh_keys:x:996:\n")
    return target


@pytest.fixture(params=["debian", "rhel"])
def any_target(request, target):
    if request.param == "rhel":
        return request.getfixturevalue("rhel_target")
    return target


@pytest.fixture
def debian_root(_debian_base):
    """A private, writable Debian bookworm root: an overlay over the session's unpacked tree.

    Every test gets its own upper layer, so what one test changes no other test sees; where the
    kernel has no overlayfs, a full copy is unpacked instead (slower).
    """
    import debian_chroot

    from cloudseed.core.root import TargetRoot

    with debian_chroot.overlay([_debian_base]) as (merged, _upper):
        yield TargetRoot(merged)


@pytest.fixture
def netns():
    """A network namespace of this test's own (a unique name), its loopback up; deleted after."""
    import shutil
    import subprocess
    import uuid

    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 for a network namespace")
    name = f"cs-mod-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)


@pytest.fixture
def chroot(debian_root):
    """``debian_root`` ready for sshd (``/run/sshd``): the name the chroot tests of the identity modules use."""
    os.makedirs(debian_root.path("/run/sshd"), exist_ok=True)
    return debian_root


@pytest.fixture
def chroot_tree(chroot) -> str:
    """The path of ``chroot`` on this machine (for ``chroot TREE command`` checks)."""
    return chroot.top
