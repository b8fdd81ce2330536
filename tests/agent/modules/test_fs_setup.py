"""fs_setup (handled by the disk_setup module, as in cloud-init) on real loop devices with real mkfs tools.

ext4, xfs, btrfs and swap are made with Debian's mkfs.ext4, mkfs.xfs, mkfs.btrfs and mkswap and
checked with blkid; nothing is mounted (the host kernel need not support the filesystem).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.agent.modules.blank_disks import blkid, host
from tests.agent.modules.module_support import run


def partitioned(loop_disk, layout, size_mib=64, table="gpt"):  # noqa: F811
    disk = loop_disk(size_mib)
    result, _ = run(host(), "disk_setup", {"disk_setup": {disk: {"table_type": table, "layout": layout}}},
                    stage="init")
    assert result.status == "ok", result.reason
    return disk


@pytest.mark.parametrize("fs,tool", [("ext4", "mkfs.ext4"), ("btrfs", "mkfs.btrfs"), ("swap", "mkswap")])
def test_filesystem_on_a_dotted_partition(loop_disk, fs, tool):  # noqa: F811
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed")
    disk = partitioned(loop_disk, [50, 50], size_mib=256)
    result, _ = run(host(), "disk_setup", {"device_aliases": {"d": disk},
                                           "fs_setup": [{"device": "d.2", "filesystem": fs, "label": "lab2"}]},
                    stage="init")
    assert result.status == "ok", result.reason
    assert blkid(f"{disk}p2", "TYPE") == fs
    assert blkid(f"{disk}p2", "LABEL") == "lab2"
    assert blkid(f"{disk}p1", "TYPE") == ""


def test_xfs_with_extra_opts_on_the_whole_disk(loop_disk):  # noqa: F811
    if not shutil.which("mkfs.xfs"):
        pytest.skip("mkfs.xfs is not installed")
    disk = loop_disk(320)  # xfsprogs 6 wants at least 300 MB
    result, _ = run(host(), "disk_setup", {"fs_setup": [{"device": disk, "partition": "none", "filesystem": "xfs",
                                                         "label": "big", "extra_opts": ["-m", "crc=1"]}]},
                    stage="init")
    assert result.status == "ok", result.reason
    assert blkid(disk, "TYPE") == "xfs" and blkid(disk, "LABEL") == "big"


def test_auto_takes_the_first_free_partition_and_is_idempotent(loop_disk):  # noqa: F811
    disk = partitioned(loop_disk, [50, 50])
    cfg = {"fs_setup": [{"device": disk, "partition": "auto", "filesystem": "ext4", "label": "one"},
                        {"device": disk, "partition": "auto", "filesystem": "ext4", "label": "two"}]}
    result, _ = run(host(), "disk_setup", cfg, stage="init")
    assert result.status == "ok", result.reason
    assert [blkid(f"{disk}p{n}", "LABEL") for n in (1, 2)] == ["one", "two"]
    uuids = [blkid(f"{disk}p{n}", "UUID") for n in (1, 2)]
    result, ctx = run(host(), "disk_setup", cfg, stage="init")  # a second run finds both and keeps them
    assert result.status == "ok" and not ctx.warnings
    assert [blkid(f"{disk}p{n}", "UUID") for n in (1, 2)] == uuids


def test_any_with_replace_fs(loop_disk):  # noqa: F811
    disk = partitioned(loop_disk, True)
    subprocess.run(["mkswap", "-q", f"{disk}p1"], check=True, capture_output=True)
    result, _ = run(host(), "disk_setup", {"fs_setup": [{"device": disk, "partition": "any", "filesystem": "ext4",
                                                         "replace_fs": "swap"}]}, stage="init")
    assert result.status == "ok", result.reason
    assert blkid(f"{disk}p1", "TYPE") == "ext4"


def test_an_existing_filesystem_is_kept_without_overwrite(loop_disk):  # noqa: F811
    disk = partitioned(loop_disk, True, size_mib=160)  # btrfs wants more than 114 MiB
    subprocess.run(["mkfs.ext4", "-q", "-L", "userdata", f"{disk}p1"], check=True)
    uuid = blkid(f"{disk}p1", "UUID")
    spec = {"device": disk, "partition": 1, "filesystem": "btrfs", "label": "new"}
    result, ctx = run(host(), "disk_setup", {"fs_setup": [spec]}, stage="init")
    assert result.status == "ok"
    assert any("holds ext4" in w for w in ctx.warnings), ctx.warnings
    assert blkid(f"{disk}p1", "UUID") == uuid
    if shutil.which("mkfs.btrfs"):
        result, _ = run(host(), "disk_setup", {"fs_setup": [dict(spec, overwrite=True)]}, stage="init")
        assert result.status == "ok", result.reason
        assert blkid(f"{disk}p1", "TYPE") == "btrfs"


def test_cmd_string_with_substitutions(loop_disk):  # noqa: F811
    disk = partitioned(loop_disk, True)
    result, _ = run(host(), "disk_setup", {"fs_setup": [{
        "device": f"{disk}.1", "filesystem": "ext4", "label": "viacmd",
        "cmd": "mkfs -t %(filesystem)s -L %(label)s %(device)s"}]}, stage="init")
    assert result.status == "ok", result.reason
    assert blkid(f"{disk}p1", "LABEL") == "viacmd"


def test_bad_entries_are_reported_and_the_others_done(loop_disk):  # noqa: F811
    disk = partitioned(loop_disk, [50, 50])
    cfg = {"fs_setup": ["not-a-mapping",
                        {"device": disk, "partition": 1, "filesystem": "nosuchfs"},
                        {"device": "/dev/cloudseed-missing", "filesystem": "ext4"},
                        {"device": disk, "partition": 7, "filesystem": "ext4"},
                        {"device": disk, "partition": 2, "filesystem": "ext4", "label": "done"}]}
    result, _ = run(host(), "disk_setup", cfg, stage="init")
    assert result.status == "failed"
    assert "fs_setup[0]: expected a mapping" in result.reason
    assert "fs_setup[1].filesystem: no mkfs.nosuchfs" in result.reason
    assert "fs_setup[2].device: /dev/cloudseed-missing does not exist" in result.reason
    assert "fs_setup[3].partition" in result.reason
    assert blkid(f"{disk}p2", "LABEL") == "done"  # the good entry still ran
    assert blkid(f"{disk}p1", "TYPE") == ""
