"""Extracting FAT12/16/32 seeds built by mkfs.vfat and mtools, compared byte for byte."""

from __future__ import annotations

import os

import pytest

from cloudseed.agent.seedfs import Image, Plan, detect_fstype, extract
from cloudseed.agent.seedfs.fat_reader import FatVolume
from tests.agent.seedfs.seedfs_helpers import (
    CIDATA,
    CONFIG_DRIVE,
    MTOOLS_ENV,
    assert_same_tree,
    make_tree,
    run,
    vfat_image,
)

RICH = {
    **CIDATA,
    "empty": b"",
    "README.TXT": b"an upper case 8.3 name (no long name entry)\n",
    "lower/readme.txt": b"a lower case 8.3 name\n",
    "Mixed Case With Spaces.Json": b"{}",
    "a-long-file-name-that-needs-several-lfn-entries-" + "y" * 120 + ".yaml": b"long\n",
    "café/ünïcode-näme.txt": "grüße\n".encode(),
    "scripts/per-boot/deeper/still/deeper/10-hello.sh": b"#!/bin/sh\necho hello\n",
    "big.bin": os.urandom(300_000),
}


def fat_bits(path) -> int:
    with Image(str(path)) as image:
        return FatVolume(image).bits


@pytest.mark.parametrize(
    "bits, size_mb, options",
    [(12, 1.44, ("-F", "12")), (16, 16, ("-F", "16", "-s", "1")), (32, 34, ("-F", "32", "-s", "1"))],
    ids=["fat12", "fat16", "fat32"],
)
def test_fat_types_with_long_names_and_nested_dirs(tmp_path, bits, size_mb, options):
    src = make_tree(tmp_path / "src", RICH, dirs=("empty-dir", "scripts/per-instance"))
    img = vfat_image(src, tmp_path / "seed.img", size_mb, *options)
    assert detect_fstype(str(img)) == "vfat"
    assert fat_bits(img) == bits
    out = tmp_path / "out"
    assert_same_tree(src, out, extract(str(img), str(out)))


def test_config_drive_vfat(tmp_path):
    src = make_tree(tmp_path / "src", CONFIG_DRIVE)
    img = vfat_image(src, tmp_path / "config-2.img", 8, label="config-2")
    assert b"config-2   " in img.read_bytes()[:512]  # mkfs.vfat keeps the case given
    out = tmp_path / "out"
    assert_same_tree(src, out, extract(str(img), str(out)))


def test_file_in_fragmented_clusters(tmp_path):
    img = tmp_path / "frag.img"
    run("mkfs.vfat", "-C", "-F", "16", "-s", "1", "-n", "cidata", str(img), str(16 * 1024))
    parts = {name: os.urandom(3 * 512 + 100) for name in ("a.bin", "b.bin", "c.bin")}
    for name, data in parts.items():
        (tmp_path / name).write_bytes(data)
        run("mcopy", "-i", str(img), str(tmp_path / name), "::/" + name, env=MTOOLS_ENV)
    run("mdel", "-i", str(img), "::/b.bin", env=MTOOLS_ENV)
    big = os.urandom(20 * 512 + 7)
    (tmp_path / "big-file.bin").write_bytes(big)
    run("mcopy", "-i", str(img), str(tmp_path / "big-file.bin"), "::/big-file.bin", env=MTOOLS_ENV)

    with Image(str(img)) as image:
        plan = Plan(image, 1 << 30, 100)
        FatVolume(image).walk(plan)
        extents = plan.nodes[("big-file.bin",)].extents
    assert len(extents) >= 2, "mtools did not fragment the file; the test would prove nothing"

    out = tmp_path / "out"
    assert sorted(extract(str(img), str(out))) == ["a.bin", "big-file.bin", "c.bin"]
    assert (out / "big-file.bin").read_bytes() == big
    assert (out / "a.bin").read_bytes() == parts["a.bin"]
    assert (out / "c.bin").read_bytes() == parts["c.bin"]


def test_long_name_with_wrong_checksum_falls_back_to_short_name(tmp_path):
    src = make_tree(tmp_path / "src", {"long-file-name.yaml": b"data\n", "other.txt": b"o"})
    img = vfat_image(src, tmp_path / "seed.img", 2)
    raw = bytearray(img.read_bytes())
    at = raw.find(b"LONG-F~1YAM")
    assert at > 0 and raw[at + 11] == 0x20  # the short entry (archive attribute) after the LFN entries
    raw[at + 7:at + 8] = b"2"  # the LFN entries' checksum no longer matches the short name
    img.write_bytes(bytes(raw))
    out = tmp_path / "out"
    assert sorted(extract(str(img), str(out))) == ["LONG-F~2.YAM", "other.txt"]
    assert (out / "LONG-F~2.YAM").read_bytes() == b"data\n"


def test_deleted_files_are_not_extracted(tmp_path):
    src = make_tree(tmp_path / "src", {"keep.txt": b"k", "gone-with-long-name.txt": b"g"})
    img = vfat_image(src, tmp_path / "seed.img", 2)
    run("mdel", "-i", str(img), "::/gone-with-long-name.txt", env=MTOOLS_ENV)
    assert extract(str(img), str(tmp_path / "out")) == ["keep.txt"]


def test_destination_is_created_private_despite_umask(tmp_path):
    img = vfat_image(make_tree(tmp_path / "src", CIDATA), tmp_path / "seed.img", 2)
    old = os.umask(0o022)
    try:
        extract(str(img), str(tmp_path / "new" / "dest"))
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "new" / "dest").st_mode & 0o777 == 0o700
