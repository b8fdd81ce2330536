"""The lab's disk assembly and read-back with the real tools: mke2fs -d, MBR, qemu-img, debugfs."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess

import pytest

from cloudseed.lab.image import PARTITION_OFFSET, make_disk
from cloudseed.lab.readback import GuestDisk

pytestmark = pytest.mark.skipif(not (shutil.which("mke2fs") and shutil.which("debugfs")),
                                reason="e2fsprogs not installed")


@pytest.fixture
def disk(tmp_path):
    tree = tmp_path / "tree"
    (tree / "etc/ssh").mkdir(parents=True)
    (tree / "etc/hostname").write_text("lab\n")
    (tree / "etc/ssh/secret").write_text("k\n")
    os.chmod(tree / "etc/ssh/secret", 0o600)
    path = str(tmp_path / "disk.raw")
    make_disk(str(tree), path)
    return path


def test_disk_has_mbr_partition_at_one_mib(disk):
    with open(disk, "rb") as handle:
        sector = handle.read(512)
    assert sector[510:512] == b"\x55\xaa"
    ptype, start, count = sector[446 + 4], *struct.unpack("<II", sector[446 + 8:446 + 16])
    assert ptype == 0x83 and start * 512 == PARTITION_OFFSET
    assert (start + count) * 512 == os.path.getsize(disk)
    probe = subprocess.run(["blkid", "-p", "-O", str(PARTITION_OFFSET), "-o", "export", disk],
                           capture_output=True, text=True).stdout
    assert "TYPE=ext4" in probe and "LABEL=cloudseed-root" in probe


def test_read_back_files_modes_and_listing(disk):
    reader = GuestDisk(disk)
    assert reader.text("/etc/hostname") == "lab\n"
    assert reader.read("/etc/missing") is None and reader.stat("/etc/missing") is None
    assert reader.stat("/etc/ssh/secret").mode & 0o777 == 0o600
    assert reader.listdir("/etc") == ["hostname", "ssh"]


def test_read_back_through_a_qcow2_overlay(disk, tmp_path):
    overlay = str(tmp_path / "overlay.qcow2")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", disk, overlay, "2G"], check=True)
    with GuestDisk.from_overlay(overlay) as reader:
        assert reader.text("/etc/hostname") == "lab\n"
        flat = reader.raw
    assert not os.path.exists(flat)  # the flattened copy is removed
