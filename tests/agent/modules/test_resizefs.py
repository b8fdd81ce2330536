"""resizefs for real: the ext4 of a grown loop-device partition resized online to fill it."""

from __future__ import annotations

import os

import pytest

from cloudseed.agent.modules import run_module
from cloudseed.agent.modules.resizefs import resize_mount
from tests.agent.modules import loop_disk
from tests.agent.modules.loop_disk import context, fs_bytes


@pytest.fixture
def small_partition(tmp_path):
    """A 64 MiB loop disk with a 24 MiB ext4 partition, mounted: (disk, partition, mount point)."""
    yield from loop_disk.small_partition(tmp_path)


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


@pytest.mark.parametrize("fstype,argv", [
    ("ext4", ["resize2fs", "/dev/vda1"]), ("ext3", ["resize2fs", "/dev/vda1"]),
    ("xfs", ["xfs_growfs", "/"]), ("btrfs", ["btrfs", "filesystem", "resize", "max", "/"]), ("vfat", None),
])
def test_the_resize_command_per_filesystem(fstype, argv):
    from cloudseed.agent.modules.resizefs import resize_command

    assert resize_command(fstype, "/dev/vda1", "/") == argv


@pytest.mark.parametrize("setting,said", [(False, "resize_rootfs is off"), ("off", "resize_rootfs is off"),
                                          (True, "offline root: the filesystem is not resized"),
                                          ("noblock", "offline root: the filesystem is not resized")])
def test_off_or_an_offline_root_resizes_nothing(target, caplog, setting, said):
    import logging

    from tests.agent.modules.module_support import run

    with caplog.at_level(logging.INFO):
        result, _ = run(target, "resizefs", {"resize_rootfs": setting}, stage="init")
    assert result.status == "ok", result.reason
    assert said in caplog.text


def test_a_mount_point_that_is_not_mounted_is_named(tmp_path):
    from cloudseed.agent.modules import ModuleError

    with pytest.raises(ModuleError, match="^resize_rootfs: "):
        resize_mount(context({}), str(tmp_path / "not-a-mount-point"))


@pytest.mark.parametrize("options", [[], ["-O", "64bit"], ["-b", "1024"]], ids=["ext4", "64bit", "1k blocks"])
def test_an_ext_filesystem_that_fills_its_device_is_not_resized_again(tmp_path, options):
    """A reboot's resizefs starts no resize2fs when the superblock says the filesystem already spans
    the device; a grown device is seen, and after resize2fs (the real one) it fills it again."""
    import shutil
    import subprocess

    from cloudseed.agent.modules.resizefs import ext_fills_device

    if not shutil.which("mkfs.ext4") or not shutil.which("resize2fs"):
        pytest.skip("needs e2fsprogs")
    image = tmp_path / "fs.img"
    image.write_bytes(b"")
    os.truncate(image, 32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", *options, str(image)], check=True)
    assert ext_fills_device(str(image))
    os.truncate(image, 48 << 20)
    assert not ext_fills_device(str(image))
    subprocess.run(["e2fsck", "-fy", str(image)], check=True, capture_output=True)
    subprocess.run(["resize2fs", str(image)], check=True, capture_output=True)
    assert ext_fills_device(str(image))


def test_what_is_not_ext_is_never_said_to_fill(tmp_path):
    from cloudseed.agent.modules.resizefs import ext_fills_device

    (tmp_path / "zeros").write_bytes(b"\0" * 8192)
    assert not ext_fills_device(str(tmp_path / "zeros"))
    assert not ext_fills_device(str(tmp_path / "missing"))


def test_in_the_network_stage_the_resize_goes_on_beside_the_modules_after_it(small_partition):
    """The network stage's resizefs starts resize2fs and returns; the users and keys modules may run
    meanwhile, anything else waits for it; joined, the filesystem fills the grown partition."""
    from cloudseed.agent.modules import ModuleError
    from cloudseed.agent.modules._background import join_before, problems

    disk, part, mount_point = small_partition
    assert run_module(context({"growpart": {"devices": [mount_point]}}), "growpart", force=True).status == "ok"
    size_before = fs_bytes(mount_point)
    ctx = context({})
    ctx.background, ctx.module_name = [], "resizefs"
    try:
        resize_mount(ctx, mount_point)
    except ModuleError as e:  # pragma: no cover - as in the test above
        pytest.skip(f"online resize refused by this kernel/sandbox: {e}")
    [job] = ctx.background
    assert job.module == "resizefs" and job.what.startswith("resize2fs /dev/")
    join_before(ctx.background, "users_groups", {})
    join_before(ctx.background, "ssh", {})
    assert not job.joined
    join_before(ctx.background, "disk_setup", {})
    assert job.joined
    if job.problem and "Permission denied" in job.problem:
        pytest.skip(f"online resize refused by this kernel/sandbox: {job.problem}")
    assert problems(ctx.background) == [] and fs_bytes(mount_point) > size_before * 2
