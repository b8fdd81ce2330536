"""Fixtures for the per-module tests: Debian and RHEL temporary roots, the real Debian chroot.

``target`` (a Debian-like temporary root) comes from tests/conftest.py. The helpers these
tests import (``run`` a module through the real framework, ``InputDatasource``) are in
``module_support.py`` beside this file; ``loop_disk`` makes blank loop disks (``blank_disks.py``).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.agent.modules import blank_disks
from tests.agent.modules.module_support import RHEL_OS_RELEASE


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
    from cloudseed.core.root import TargetRoot
    from tests.agent.identity import debian_chroot

    with debian_chroot.overlay([_debian_base]) as (merged, _upper):
        yield TargetRoot(merged)


@pytest.fixture
def netns():
    """A network namespace of this test's own (a unique name), its loopback up; deleted after."""
    import shutil
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


@pytest.fixture
def loop_disk(tmp_path):
    """A factory of loop devices (with partition scanning) over sparse files; all detached afterwards."""
    blank_disks.needs_tools("losetup", "sfdisk", "sgdisk", "blkid", "wipefs")
    made: list[str] = []

    def make(size_mib: int = 64) -> str:
        image = tmp_path / f"disk{len(made)}.img"
        with open(image, "wb") as handle:
            handle.truncate(size_mib * blank_disks.MIB)
        proc = subprocess.run(["losetup", "--find", "--show", "--partscan", str(image)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"no loop device: {proc.stderr.strip()}")
        made.append(proc.stdout.strip())
        return made[-1]

    yield make
    for device in made:
        subprocess.run(["losetup", "--detach", device], capture_output=True)
