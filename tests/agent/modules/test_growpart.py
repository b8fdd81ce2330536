"""growpart for real: a partitioned loop device grown to the end of its disk; bad paths and modes named."""

from __future__ import annotations

import os

import pytest

from cloudseed.agent.modules import ModuleContext, run_module
from cloudseed.agent.state import Paths
from tests.agent.modules import loop_disk
from tests.agent.modules.loop_disk import context, sysfs


@pytest.fixture
def small_partition(tmp_path):
    """A 64 MiB loop disk with a 24 MiB ext4 partition, mounted: (disk, partition, mount point)."""
    yield from loop_disk.small_partition(tmp_path)


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
