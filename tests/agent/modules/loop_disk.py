"""A real partitioned disk for the growpart and resizefs tests: a loop device with a small mounted ext4."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from cloudseed.agent.modules import ModuleContext
from cloudseed.agent.state import Paths
from cloudseed.core.root import TargetRoot


def sysfs(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def wait_for_partition(disk: str, part: str) -> None:
    """The kernel scans the new loop device's partition table asynchronously; nudge it if needed."""
    import time

    entry = f"/sys/class/block/{os.path.basename(part)}"
    for attempt in range(50):
        if os.path.exists(entry):
            return
        if attempt == 10:
            subprocess.run(["partx", "-a", disk], capture_output=True)
        time.sleep(0.1)
    pytest.skip("the loop device's partition did not appear")


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def small_partition(tmp_path):
    """A 64 MiB disk image with a 24 MiB ext4 partition, attached and mounted (a generator for a fixture)."""
    for tool in ("sfdisk", "growpart", "losetup", "mkfs.ext4", "resize2fs"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    if os.geteuid() != 0:
        pytest.skip("needs root for loop devices and mount")
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(64 * 1024 * 1024)
    subprocess.run(["sfdisk", "-q", str(image)], input=",24M,L\n", text=True, check=True)
    disk = sh("losetup", "-f", "--show", "-P", str(image)).strip()
    part = f"{disk}p1"
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()
    try:
        wait_for_partition(disk, part)
        if not os.path.exists(part):  # no udev here: make the node from sysfs
            major, minor = sysfs(f"/sys/class/block/{os.path.basename(part)}/dev").split(":")
            os.mknod(part, 0o600 | 0o060000, os.makedev(int(major), int(minor)))
        sh("mkfs.ext4", "-q", part)
        if subprocess.run(["mount", part, str(mount_point)]).returncode != 0:
            pytest.skip("cannot mount ext4 here")
        yield disk, part, str(mount_point)
    finally:
        subprocess.run(["umount", str(mount_point)], capture_output=True)
        subprocess.run(["losetup", "-d", disk], capture_output=True)


_STATE = tempfile.TemporaryDirectory(prefix="module-state-")  # removed when the test process ends


def context(cfg: dict) -> ModuleContext:
    """A module context on the host's root (the loop devices are the machine's); its state in a scratch root."""
    return ModuleContext(root=TargetRoot("/"), paths=Paths(TargetRoot(_STATE.name)), cfg=cfg, instance_id="i-grow",
                         stage="init")


def fs_bytes(mount_point: str) -> int:
    st = os.statvfs(mount_point)
    return st.f_blocks * st.f_frsize
