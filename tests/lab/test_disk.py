"""The lab's disk assembly and read-back with the real tools: mke2fs -d, MBR, qemu-img, debugfs."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess

import pytest

from cloudseed.lab.images.image import PARTITION_OFFSET, make_disk
from cloudseed.lab.images.readback import GuestDisk

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


def test_prune_keeps_recent_and_in_use_images_of_other_checkouts(tmp_path):
    """Two checkouts sharing one cache each build their own image: a build must not delete the
    image under the other's running VM (it did: every build removed all other images)."""
    import time

    from cloudseed.lab.images import image

    def make(name: str, age: float) -> str:
        for ext in (".raw", ".vmlinuz", ".initrd", ".method"):
            path = tmp_path / f"{name}{ext}"
            path.write_text("x")
            os.utime(path, (time.time() - age, time.time() - age))
        return str(tmp_path / f"{name}.raw")

    fresh = make("cloudseed-new", 0)
    recent = [make(f"cloudseed-r{i}", 7200 + i) for i in range(image.KEEP_RECENT_IMAGES)]
    in_use = make("cloudseed-inuse", 60)
    make("cloudseed-old", 86400)
    other_agent = make("reference-old", 86400)
    image._prune(str(tmp_path), "cloudseed", keep="cloudseed-new")
    left = {p.name for p in tmp_path.iterdir()}
    assert os.path.basename(fresh) in left and os.path.basename(in_use) in left
    # the in-use one is the most recent, so one of the 'recent' ones falls out of the kept few
    assert sum(os.path.basename(r) in left for r in recent) == image.KEEP_RECENT_IMAGES - 1
    assert not any(n.startswith("cloudseed-old") for n in left)
    assert os.path.basename(other_agent) in left
