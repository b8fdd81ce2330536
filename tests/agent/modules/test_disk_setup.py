"""disk_setup's partition tables on real loop devices with the real sfdisk/sgdisk, checked with sfdisk --dump.

The module runs on the host root (``TargetRoot("/")``): it only partitions the loop devices these
tests create on sparse files (detached in teardown), which is the machine's own ``/dev`` as on a
booted instance; its semaphore goes to a scratch state root, not the host's ``/var/lib/cloudseed``.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.agent.modules.blank_disks import MIB, blkid, dump, host
from tests.agent.modules.module_support import InputDatasource, run


def test_mbr_layout_with_types(loop_disk):
    disk = loop_disk(64)
    result, _ = run(host(), "disk_setup", {"disk_setup": {disk: {"table_type": "mbr", "layout": [33, [66, 82]]}}},
                    stage="init")
    assert result.status == "ok", result.reason
    assert not os.path.exists("/var/lib/cloudseed/instances/i-test")  # its semaphore went to a scratch root
    table = dump(disk)
    assert table["label"] == "dos"
    parts = table["partitions"]
    assert [p["type"] for p in parts] == ["83", "82"]
    total = 64 * MIB // 512
    assert abs(parts[0]["size"] - total * 33 // 100) < 2048  # within the 1 MiB alignment
    assert parts[1]["start"] + parts[1]["size"] >= total - 2048  # the last takes the rest


def test_gpt_layout_true_and_alias(loop_disk):
    disk = loop_disk(32)
    result, _ = run(host(), "disk_setup", {"device_aliases": {"data": disk},
                                           "disk_setup": {"data": {"table_type": "gpt", "layout": True}}},
                    stage="init")
    assert result.status == "ok", result.reason
    table = dump(disk)
    assert table["label"] == "gpt" and len(table["partitions"]) == 1
    assert table["partitions"][0]["type"] == "0FC63DAF-8483-4772-8E79-3D69D8477DE4"  # Linux filesystem


def test_gpt_types_are_sgdisk_codes(loop_disk):
    disk = loop_disk(32)
    result, _ = run(host(), "disk_setup", {"disk_setup": {disk: {"table_type": "gpt", "layout": [[50, 82], 50]}}},
                    stage="init")
    assert result.status == "ok", result.reason
    types = [p["type"] for p in dump(disk)["partitions"]]
    assert types == ["0657FD6D-A4AB-43C4-84E5-0933C84B4F4F", "0FC63DAF-8483-4772-8E79-3D69D8477DE4"]


def test_ephemeral0_from_the_block_device_mapping(loop_disk):
    disk = loop_disk(32)
    ds = InputDatasource(metadata={"block-device-mapping": {"ami": "/dev/vda", "ephemeral0": disk}})
    result, _ = run(host(), "disk_setup", {"disk_setup": {"ephemeral0": {"layout": True}}}, datasource=ds,
                    stage="init")
    assert result.status == "ok", result.reason
    assert len(dump(disk)["partitions"]) == 1


def test_a_used_disk_is_left_alone_without_overwrite(loop_disk):
    disk = loop_disk(32)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "keepme", disk], check=True)
    result, ctx = run(host(), "disk_setup", {"disk_setup": {disk: {"layout": True}}}, stage="init")
    assert result.status == "ok"
    assert any("holds a ext4 filesystem" in w for w in ctx.warnings), ctx.warnings
    assert blkid(disk, "LABEL") == "keepme"  # untouched
    result, _ = run(host(), "disk_setup", {"disk_setup": {disk: {"layout": True, "overwrite": True}}}, stage="init")
    assert result.status == "ok", result.reason
    assert dump(disk)["label"] == "dos" and blkid(disk, "TYPE") == ""


def test_same_layout_again_is_not_rewritten(loop_disk):
    disk = loop_disk(32)
    cfg = {"disk_setup": {disk: {"table_type": "gpt", "layout": [50, 50], "overwrite": True}}}
    run(host(), "disk_setup", cfg, stage="init")
    first = dump(disk)
    result, ctx = run(host(), "disk_setup", cfg, stage="init")
    assert result.status == "ok" and not ctx.warnings
    assert dump(disk)["id"] == first["id"]  # the same table (a rewrite would have a new disk GUID)


def test_remove_needs_overwrite(loop_disk):
    disk = loop_disk(32)
    run(host(), "disk_setup", {"disk_setup": {disk: {"layout": True}}}, stage="init")
    result, _ = run(host(), "disk_setup", {"disk_setup": {disk: {"layout": "remove"}}}, stage="init")
    assert result.status == "failed" and "overwrite: true" in result.reason
    result, _ = run(host(), "disk_setup", {"disk_setup": {disk: {"layout": "remove", "overwrite": True}}},
                    stage="init")
    assert result.status == "ok", result.reason
    assert blkid(disk, "PTTYPE") == ""


@pytest.mark.parametrize("cfg,words", [
    ({"disk_setup": ["not", "a", "mapping"]}, ["disk_setup", "expected a mapping"]),
    ({"disk_setup": {"/dev/cloudseed-no-such-disk": {"layout": True}}}, ["disk_setup./dev/cloudseed-no-such-disk",
                                                                         "does not exist"]),
    ({"disk_setup": {"ephemeral0": {"layout": True}}}, ["ephemeral0", "block-device mapping"]),
    ({"disk_setup": {"/dev/null": {"layout": True}}}, ["not a block device"]),
])
def test_bad_input_names_the_key(cfg, words):
    result, _ = run(host(), "disk_setup", cfg, stage="init")
    assert result.status == "failed"
    for word in words:
        assert word in result.reason


def test_bad_layouts(loop_disk):
    disk = loop_disk(16)
    for layout, words in (([60, 50, 10], "more than 100%"), ([[50, 82, 1]], "[percent, type]"),
                          ([20, 20, 20, 20, 20], "at most 4 primary")):
        result, _ = run(host(), "disk_setup", {"disk_setup": {disk: {"layout": layout}}}, stage="init")
        assert result.status == "failed" and words in result.reason, result.reason
    assert blkid(disk, "PTTYPE") == ""  # nothing was written


def test_a_partition_is_not_a_disk(loop_disk):
    disk = loop_disk(16)
    run(host(), "disk_setup", {"disk_setup": {disk: {"layout": True}}}, stage="init")
    result, _ = run(host(), "disk_setup", {"disk_setup": {f"{disk}p1": {"layout": True}}}, stage="init")
    assert result.status == "failed" and "not a whole disk" in result.reason


def test_partitioning_tool_missing_is_reported(loop_disk, target):
    """In a root without sgdisk the command is not found on the target: a clear failure, disk untouched."""
    disk = loop_disk(16)
    os.makedirs(target.path("/dev"), exist_ok=True)
    st = os.stat(disk)
    os.mknod(target.path(disk), 0o600 | 0o060000, st.st_rdev)
    result, _ = run(target, "disk_setup", {"disk_setup": {disk: {"table_type": "gpt", "layout": True}}},
                    stage="init")
    assert result.status == "failed"
    assert "command not found on the target" in result.reason
    assert blkid(disk, "PTTYPE") == ""


def test_gpt_with_sfdisk_where_gdisk_is_missing(loop_disk):
    """Images without gdisk (the lab's) get GPT from sfdisk: the script, fed to the real sfdisk here."""
    from cloudseed.agent.modules import _partition_tables as pt

    disk = loop_disk(32)
    sectors, _ = pt.disk_sectors(disk)
    script = pt.gpt_script(pt.normalise_layout([[30, 82], [30, "8e00"], 40], "d"), sectors)
    subprocess.run(["sfdisk", "--quiet", disk], input=script, text=True, check=True)
    found = pt.current_types(host(), disk, "gpt")
    assert found == ["0657fd6d-a4ab-43c4-84e5-0933c84b4f4f", "e6d6d379-f507-44c2-a23c-238f2a3df928",
                     "0fc63daf-8483-4772-8e79-3d69d8477de4"]
    assert pt.layout_matches(found, [(30, "82"), (30, "8e00"), (40, None)], "gpt")
    assert not pt.layout_matches(found, [(30, "83"), (30, "8e00"), (40, None)], "gpt")
    with pytest.raises(pt.LayoutError, match="needs sgdisk"):
        pt.gpt_script([(50, "abcd"), (50, None)], sectors)
