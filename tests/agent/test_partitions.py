"""Growing MBR and GPT partitions in disk images, compared byte for byte with cloud-utils' growpart.

Each layout is made with sfdisk, the disk image is enlarged, and one copy is grown by the
``growpart`` command, the other by ``cloudseed.agent.modules._partitions``: the images must be identical
(the same table, the same CRCs, the same backup GPT), and ``sfdisk --verify`` must be happy.
"""

from __future__ import annotations

import filecmp
import shutil
import struct
import subprocess

import pytest

from cloudseed.agent.modules import _partitions as partitions

pytestmark = pytest.mark.skipif(shutil.which("sfdisk") is None, reason="sfdisk is not installed")
MiB = 1024 * 1024


def make_disk(path, script: str, size: int, grown: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)
    subprocess.run(["sfdisk", "-q", str(path)], input=script, text=True, check=True, capture_output=True)
    with open(path, "r+b") as f:
        f.truncate(grown)


def growpart_command(path, number: int) -> subprocess.CompletedProcess:
    if shutil.which("growpart") is None:
        pytest.skip("growpart (cloud-guest-utils) is not installed")
    return subprocess.run(["growpart", str(path), str(number)], capture_output=True, text=True)


LAYOUTS = {
    "gpt-one-partition": ("label: gpt\n,32M\n", 64 * MiB, 200 * MiB, 1),
    "dos-one-partition": ("label: dos\n,32M,L\n", 64 * MiB, 200 * MiB, 1),
    "gpt-root-after-efi": ("label: gpt\n,8M,U\n,24M,L\n", 64 * MiB, 300 * MiB, 2),
    "dos-second-of-two": ("label: dos\n,8M,L\n,16M,L\n", 64 * MiB, 100 * MiB, 2),
    "gpt-unaligned-growth": ("label: gpt\n,32M\n", 64 * MiB, 64 * MiB + 5 * MiB + 3 * 512, 1),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_same_bytes_as_the_growpart_command(tmp_path, name):
    script, size, grown, number = LAYOUTS[name]
    ours, theirs = tmp_path / "ours.img", tmp_path / "theirs.img"
    make_disk(ours, script, size, grown)
    shutil.copyfile(ours, theirs)
    proc = growpart_command(theirs, number)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    growth = partitions.grow(str(ours), number)
    assert growth.changed and f"end={growth.new_end}" in proc.stdout
    assert filecmp.cmp(ours, theirs, shallow=False)
    verify = subprocess.run(["sfdisk", "--verify", str(ours)], capture_output=True, text=True)
    assert verify.returncode == 0 and "No errors detected" in verify.stdout


def test_a_partition_grows_only_up_to_the_next_one(tmp_path):
    disk = tmp_path / "disk.img"
    make_disk(disk, "label: gpt\nstart=2048,size=16M\nstart=67584,size=8M\n", 64 * MiB, 64 * MiB)
    growth = partitions.grow(str(disk), 1)
    assert growth.changed and growth.new_end == 67584 - 1
    dump = subprocess.run(["sfdisk", "--dump", str(disk)], capture_output=True, text=True, check=True).stdout
    assert "size=       65536" in dump  # 2048 .. 67583


def test_nothing_to_grow_is_reported_not_written(tmp_path):
    disk = tmp_path / "disk.img"
    make_disk(disk, "label: gpt\n,32M\n", 64 * MiB, 64 * MiB)
    first = partitions.grow(str(disk), 1)
    assert first.changed
    before = disk.read_bytes()
    again = partitions.grow(str(disk), 1)
    assert not again.changed and "already fills" in again.reason
    assert disk.read_bytes() == before


def test_less_than_a_mebibyte_is_not_worth_growing(tmp_path):
    disk = tmp_path / "disk.img"
    make_disk(disk, "label: dos\n,32M,L\n", 64 * MiB, 64 * MiB)
    partitions.grow(str(disk), 1)
    with open(disk, "r+b") as f:
        f.truncate(64 * MiB + 512 * 1024)
    growth = partitions.grow(str(disk), 1)
    assert not growth.changed and "could only be grown by" in growth.reason
    proc = growpart_command(disk, 1)
    assert proc.returncode == 1 and "NOCHANGE" in proc.stdout  # the command agrees


def test_dry_run_changes_nothing(tmp_path):
    disk = tmp_path / "disk.img"
    make_disk(disk, "label: gpt\n,32M\n", 64 * MiB, 128 * MiB)
    before = disk.read_bytes()
    growth = partitions.grow(str(disk), 1, dry_run=True)
    assert growth.changed and disk.read_bytes() == before


def test_extended_partitions_are_left_to_the_growpart_command(tmp_path):
    disk = tmp_path / "disk.img"
    make_disk(disk, "label: dos\n,8M,L\n,,E\n,8M,L\n", 64 * MiB, 128 * MiB)
    with pytest.raises(partitions.Unsupported, match="extended"):
        partitions.grow(str(disk), 5)


def test_a_damaged_gpt_header_is_not_touched(tmp_path):
    disk = tmp_path / "disk.img"
    make_disk(disk, "label: gpt\n,32M\n", 64 * MiB, 128 * MiB)
    with open(disk, "r+b") as f:
        f.seek(512 + 48)
        f.write(struct.pack("<Q", 12345))  # last usable LBA changed without fixing the CRC
    before = disk.read_bytes()
    with pytest.raises(partitions.Unsupported, match="CRC"):
        partitions.grow(str(disk), 1)
    assert disk.read_bytes() == before


def test_missing_partition_and_missing_table_are_clear_errors(tmp_path):
    disk = tmp_path / "disk.img"
    make_disk(disk, "label: gpt\n,32M\n", 64 * MiB, 128 * MiB)
    with pytest.raises(partitions.PartitionError, match="no partition 3"):
        partitions.grow(str(disk), 3)
    blank = tmp_path / "blank.img"
    with open(blank, "wb") as f:
        f.truncate(8 * MiB)
    with pytest.raises(partitions.PartitionError, match="no partition table"):
        partitions.grow(str(blank), 1)


def test_a_disk_with_nothing_to_grow_is_only_opened_read_only(tmp_path, monkeypatch):
    """Closing a disk opened for writing makes udev probe it again: not on every boot for nothing."""
    import os

    disk = tmp_path / "disk.img"
    make_disk(disk, "label: gpt\n,32M\n", 64 * MiB, 128 * MiB)
    partitions.grow(str(disk), 1)
    flags = []
    real_open = os.open

    def recording_open(path, mode, *args, **kwargs):
        flags.append(mode)
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(partitions.os, "open", recording_open)
    assert not partitions.grow(str(disk), 1).changed
    assert flags and all(mode & os.O_ACCMODE == os.O_RDONLY for mode in flags)
