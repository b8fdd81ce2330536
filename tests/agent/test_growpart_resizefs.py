"""growpart and resizefs for real: a partitioned loop device, a mounted ext4, grown in place."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from cloudseed.agent.modules import ModuleContext, run_module
from cloudseed.agent.modules.resizefs import resize_mount
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


@pytest.fixture
def small_partition(tmp_path):
    """A 64 MiB disk image with a 24 MiB ext4 partition, attached and mounted."""
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


def context(cfg: dict) -> ModuleContext:
    live = TargetRoot("/")
    return ModuleContext(root=live, paths=Paths(live), cfg=cfg, instance_id="i-grow", stage="init")


def fs_bytes(mount_point: str) -> int:
    st = os.statvfs(mount_point)
    return st.f_blocks * st.f_frsize


def test_growpart_grows_the_partition_to_the_end_of_the_disk(small_partition):
    disk, part, mount_point = small_partition
    sectors_before = int(sysfs(f"/sys/class/block/{os.path.basename(part)}/size"))
    result = run_module(context({"growpart": {"devices": [mount_point]}}), "growpart", force=True)
    assert result.status == "ok", result.reason
    sectors_after = int(sysfs(f"/sys/class/block/{os.path.basename(part)}/size"))
    assert sectors_after > sectors_before * 2
    # a second run has nothing to do and says so without failing
    again = run_module(context({"growpart": {"devices": [mount_point]}}), "growpart", force=True)
    assert again.status == "ok", again.reason


def test_resize_fills_the_grown_partition(small_partition):
    from cloudseed.agent.modules import ModuleError

    disk, part, mount_point = small_partition
    assert run_module(context({"growpart": {"devices": [mount_point]}}), "growpart", force=True).status == "ok"
    size_before = fs_bytes(mount_point)
    try:
        resize_mount(context({}), mount_point)
    except ModuleError as e:
        if "Permission denied" in str(e):  # this sandbox refuses the online-resize ioctl
            pytest.skip(f"online resize refused by this kernel/sandbox: {e}")
        raise
    assert fs_bytes(mount_point) > size_before * 2


def test_growpart_reports_a_path_that_is_not_a_partition(small_partition):
    disk, _part, _mount = small_partition
    result = run_module(context({"growpart": {"devices": [disk]}}), "growpart", force=True)
    assert result.status == "failed" and "is not a partition" in result.reason


def test_growpart_off_and_offline_root(target):
    ctx = ModuleContext(root=target, paths=Paths(target), cfg={"growpart": {"mode": "off"}}, instance_id="i",
                        stage="init")
    assert run_module(ctx, "growpart", force=True).status == "ok"
    bad = ModuleContext(root=target, paths=Paths(target), cfg={"growpart": {"mode": "sideways"}},
                        instance_id="i", stage="init")
    assert "growpart.mode" in run_module(bad, "growpart", force=True).reason
