"""Fixtures for the identity tests: temporary Debian/RHEL roots, a module runner, the real chroot."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from identity_support import RHEL_OS_RELEASE  # noqa: E402  (after the sys.path line)


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


@pytest.fixture(scope="session")
def chroot_tree():
    """A fresh copy of the cached debootstrapped Debian bookworm tree (built when missing)."""
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        pytest.skip("needs root and debootstrap")
    import debian_chroot

    base = tempfile.mkdtemp(prefix="cloudseed-identity-chroot-")
    tree = debian_chroot.unpack(os.path.join(base, "root"))
    os.makedirs(os.path.join(tree, "run/sshd"), exist_ok=True)
    yield tree
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def chroot(chroot_tree):
    from cloudseed.core.root import TargetRoot

    return TargetRoot(chroot_tree)
