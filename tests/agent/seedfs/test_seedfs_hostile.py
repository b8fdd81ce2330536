"""Corrupt and hostile seed images: each raises SeedFSError and nothing is written anywhere.

The images are real ones (genisoimage, mkfs.vfat + mtools) with a few bytes patched; every patch
first asserts that the bytes it replaces are the ones expected, so a change in the tools makes
the test fail instead of silently testing nothing.
"""

from __future__ import annotations

import os
import struct

import pytest

from cloudseed.agent.seedfs import SeedFSError, detect_fstype, extract
from tests.agent.seedfs.seedfs_helpers import (
    CIDATA,
    CONFIG_DRIVE,
    MTOOLS_ENV,
    genisoimage,
    listing,
    make_tree,
    run,
    vfat_image,
)

SECTOR = 2048


def assert_refused(tmp_path, img, match: str, **limits) -> None:
    before = listing(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(SeedFSError, match=match):
        extract(str(img), str(out), **limits)
    after = [p for p in listing(tmp_path) if p != "out"]
    assert after == before
    assert not out.exists() or listing(out) == []


def patch(img, offset: int, old: bytes, new: bytes) -> None:
    raw = bytearray(img.read_bytes())
    assert raw[offset:offset + len(old)] == old, (raw[offset:offset + len(old)], old)
    raw[offset:offset + len(new)] = new
    img.write_bytes(bytes(raw))


def both_endian32(value: int) -> bytes:
    return struct.pack("<I", value) + struct.pack(">I", value)


# ---------------------------------------------------------------------------------------- ISO 9660
@pytest.fixture
def config_iso(tmp_path):
    src = make_tree(tmp_path / "src", {**CONFIG_DRIVE, "big.bin": os.urandom(400_000)})
    return genisoimage(src, tmp_path / "seed.iso", "-J", "-R", label="config-2")


def test_truncated_iso(tmp_path, config_iso):
    data = config_iso.read_bytes()
    config_iso.write_bytes(data[:len(data) * 6 // 10])
    assert_refused(tmp_path, config_iso, "outside the image")


def test_iso_truncated_inside_volume_descriptors(tmp_path, config_iso):
    config_iso.write_bytes(config_iso.read_bytes()[:16 * SECTOR + 300])
    assert_refused(tmp_path, config_iso, "outside the image")


def test_iso_root_extent_past_the_end(tmp_path, config_iso):
    data = config_iso.read_bytes()
    root_lba = struct.unpack_from("<I", data, 16 * SECTOR + 156 + 2)[0]
    huge = len(data) // SECTOR + 1000
    patch(config_iso, 16 * SECTOR + 156 + 2, both_endian32(root_lba), both_endian32(huge))
    assert_refused(tmp_path, config_iso, "outside the image")


def _subdir_record(data: bytes, iso_name: bytes) -> int:
    """Offset of the primary-tree directory record named ``iso_name`` (name length byte before it)."""
    at = data.find(bytes([len(iso_name)]) + iso_name)
    assert at > 0
    return at - 32


def test_iso_subdirectory_extent_past_the_end(tmp_path, config_iso):
    data = config_iso.read_bytes()
    rec = _subdir_record(data, b"OPENSTAC")
    lba = struct.unpack_from("<I", data, rec + 2)[0]
    patch(config_iso, rec + 2, both_endian32(lba), both_endian32(0xFFFFFF00))
    assert_refused(tmp_path, config_iso, "outside the image")


def test_iso_directory_loop(tmp_path, config_iso):
    data = config_iso.read_bytes()
    root_lba = struct.unpack_from("<I", data, 16 * SECTOR + 156 + 2)[0]
    rec = _subdir_record(data, b"OPENSTAC")
    lba = struct.unpack_from("<I", data, rec + 2)[0]
    patch(config_iso, rec + 2, both_endian32(lba), both_endian32(root_lba))
    assert_refused(tmp_path, config_iso, "directory loop")


@pytest.mark.parametrize("evil", [b"..", b"a/b", b"a\0b", b"."], ids=["dotdot", "slash", "nul", "dot"])
def test_iso_rock_ridge_unsafe_names(tmp_path, evil):
    plain = b"ab" if len(evil) == 2 else b"a_b" if len(evil) == 3 else b"z"
    src = make_tree(tmp_path / "src", {**CIDATA, plain.decode(): b"payload"})
    iso = genisoimage(src, tmp_path / "seed.iso", "-R")
    nm = b"NM" + bytes([5 + len(plain), 1, 0]) + plain
    at = iso.read_bytes().find(nm)
    patch(iso, at, nm, nm[:5] + evil)
    assert_refused(tmp_path, iso, "unsafe name")


def test_iso_joliet_name_with_slash(tmp_path):
    src = make_tree(tmp_path / "src", {"x_y": b"payload"})
    iso = genisoimage(src, tmp_path / "seed.iso", "-J")
    name = "x_y".encode("utf-16-be")
    patch(iso, iso.read_bytes().find(name), name, "x/y".encode("utf-16-be"))
    assert_refused(tmp_path, iso, "unsafe name")


def test_iso_size_and_count_limits(tmp_path, config_iso):
    assert_refused(tmp_path, config_iso, "limit", max_total_bytes=100_000)
    assert_refused(tmp_path, config_iso, "limit", max_files=3)
    out = tmp_path / "ok"
    assert len(extract(str(config_iso), str(out), max_total_bytes=500_000, max_files=10))


# ---------------------------------------------------------------------------------------- FAT
def bpb(data: bytes) -> dict[str, int]:
    sector, per_cluster, reserved, fats, root_entries = struct.unpack_from("<HBHBH", data, 11)
    fat_size = struct.unpack_from("<H", data, 22)[0] or struct.unpack_from("<I", data, 36)[0]
    return {"sector": sector, "reserved": reserved, "fats": fats, "fat_size": fat_size}


def patch_fat16_entry(img, cluster: int, old: int, new: int) -> None:
    """Set FAT16 entry ``cluster`` in every FAT copy."""
    geo = bpb(img.read_bytes())
    for n in range(geo["fats"]):
        offset = (geo["reserved"] + n * geo["fat_size"]) * geo["sector"] + cluster * 2
        patch(img, offset, struct.pack("<H", old), struct.pack("<H", new))


def fat16_with_file(tmp_path, data: bytes):
    img = tmp_path / "seed.img"
    run("mkfs.vfat", "-C", "-F", "16", "-s", "1", "-n", "cidata", str(img), str(16 * 1024))
    (tmp_path / "loop.bin").write_bytes(data)
    run("mcopy", "-i", str(img), str(tmp_path / "loop.bin"), "::/loop.bin", env=MTOOLS_ENV)
    os.unlink(tmp_path / "loop.bin")
    raw = img.read_bytes()
    entry = raw.find(b"LOOP    BIN")
    first = struct.unpack_from("<H", raw, entry + 26)[0]
    return img, first


def test_fat_chain_loop(tmp_path):
    img, first = fat16_with_file(tmp_path, os.urandom(4 * 512))
    patch_fat16_entry(img, first + 1, first + 2, first)  # second cluster points back to the first
    assert_refused(tmp_path, img, "loops")


def test_fat_chain_too_short_for_size(tmp_path):
    img, first = fat16_with_file(tmp_path, os.urandom(4 * 512))
    patch_fat16_entry(img, first + 1, first + 2, 0xFFFF)
    assert_refused(tmp_path, img, "ends after 2 of 4 clusters")


def test_fat_chain_into_free_cluster(tmp_path):
    img, first = fat16_with_file(tmp_path, os.urandom(4 * 512))
    patch_fat16_entry(img, first + 1, first + 2, 0x7000)  # a free cluster far away
    assert_refused(tmp_path, img, "free cluster")


def test_fat_cluster_out_of_range(tmp_path):
    img, first = fat16_with_file(tmp_path, os.urandom(4 * 512))
    patch_fat16_entry(img, first + 1, first + 2, 0xFFF0)
    assert_refused(tmp_path, img, "out of range")


def test_fat32_directory_loop(tmp_path):
    src = make_tree(tmp_path / "src", {"sub/file.txt": b"x", "top.txt": b"t"})
    img = vfat_image(src, tmp_path / "seed.img", 34, "-F", "32", "-s", "1")
    raw = img.read_bytes()
    entry = raw.find(b"SUB        \x10")
    root_cluster = struct.unpack_from("<I", raw, 44)[0]
    hi, lo = struct.unpack_from("<H", raw, entry + 20)[0], struct.unpack_from("<H", raw, entry + 26)[0]
    patch(img, entry + 26, struct.pack("<H", lo), struct.pack("<H", root_cluster & 0xFFFF))
    patch(img, entry + 20, struct.pack("<H", hi), struct.pack("<H", root_cluster >> 16))
    assert_refused(tmp_path, img, "directory loop")


def test_truncated_fat(tmp_path):
    src = make_tree(tmp_path / "src", {**CONFIG_DRIVE, "big.bin": os.urandom(3_000_000)})
    img = vfat_image(src, tmp_path / "seed.img", 8)
    data = img.read_bytes()
    img.write_bytes(data[:len(data) * 3 // 10])
    assert_refused(tmp_path, img, "outside the image")


def rewrite_long_name(img, short: bytes, new: str) -> None:
    """Replace the characters of the LFN entries before short entry ``short`` (same length name)."""
    raw = bytearray(img.read_bytes())
    at = raw.find(short)
    entries = []
    pos = at - 32
    while raw[pos + 11] == 0x0F:
        entries.append(pos)
        pos -= 32
    assert entries
    spans = [(1, 11), (14, 26), (28, 32)]
    slots = [(e + a, e + b) for e in entries for a, b in spans]  # entries are in name order already
    chars = b"".join(bytes(raw[a:b]) for a, b in slots)
    old = chars.decode("utf-16-le").split("\0")[0]
    assert len(old) == len(new)
    encoded = new.encode("utf-16-le") + chars[len(new) * 2:]
    pos = 0
    for a, b in slots:
        raw[a:b] = encoded[pos:pos + b - a]
        pos += b - a
    img.write_bytes(bytes(raw))


@pytest.mark.parametrize("evil", ["..", "a/", "/b"], ids=["dotdot", "slash-end", "slash-start"])
def test_fat_unsafe_long_names(tmp_path, evil):
    src = make_tree(tmp_path / "src", {"Ab": b"payload", "user-data": b"u"})  # mixed case: mtools writes an LFN
    img = vfat_image(src, tmp_path / "seed.img", 2)
    rewrite_long_name(img, b"AB         ", evil)
    assert_refused(tmp_path, img, "unsafe name")


def test_fat_long_name_ends_at_nul(tmp_path):
    # NUL terminates a long name (the specification pads with 0x0000 then 0xFFFF), so it never reaches a path
    src = make_tree(tmp_path / "src", {"a_B": b"payload"})
    img = vfat_image(src, tmp_path / "seed.img", 2)
    rewrite_long_name(img, b"A_B        ", "a\0b")
    out = tmp_path / "out"
    assert extract(str(img), str(out)) == ["a"]
    assert (out / "a").read_bytes() == b"payload"


def test_fat_short_name_with_slash(tmp_path):
    src = make_tree(tmp_path / "src", {"A_B": b"payload"})  # upper case 8.3: no long name entry
    img = vfat_image(src, tmp_path / "seed.img", 2)
    raw = img.read_bytes()
    at = raw.find(b"A_B        ")
    assert raw[at - 32 + 11] != 0x0F  # really no LFN entry in front of it
    patch(img, at, b"A_B", b"A/B")
    assert_refused(tmp_path, img, "unsafe name")


def test_fat_size_and_count_limits(tmp_path):
    src = make_tree(tmp_path / "src", {**CONFIG_DRIVE, "big.bin": os.urandom(200_000)})
    img = vfat_image(src, tmp_path / "seed.img", 4)
    assert_refused(tmp_path, img, "limit", max_total_bytes=150_000)
    assert_refused(tmp_path, img, "limit", max_files=5)


# ---------------------------------------------------------------------------------------- both
def test_existing_symlink_in_destination_is_not_followed(tmp_path):
    src = make_tree(tmp_path / "src", CIDATA)
    iso = genisoimage(src, tmp_path / "seed.iso", "-J", "-R")
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(victim, out / "user-data")
    with pytest.raises(SeedFSError, match="cannot write"):
        extract(str(iso), str(out))
    assert victim.read_bytes() == b"untouched"
    assert listing(out) == ["user-data"]  # files written before the failure were removed again


def test_not_a_filesystem(tmp_path):
    zeros = tmp_path / "zeros.img"
    zeros.write_bytes(bytes(1 << 20))
    text = tmp_path / "text"
    text.write_text("#cloud-config\n" * 1000)
    ext4 = tmp_path / "ext4.img"
    ext4.write_bytes(bytes(4 << 20))
    run("mkfs.ext4", "-q", "-F", str(ext4))
    for path in (zeros, text, ext4, tmp_path / "missing"):
        assert detect_fstype(str(path)) is None
    assert_refused(tmp_path, zeros, "neither an ISO 9660 nor a FAT")


@pytest.mark.parametrize("kind", ["iso", "fat12", "fat32"])
def test_random_metadata_corruption_only_raises_seedfs_error(tmp_path, kind):
    """Seeded byte mutations of descriptors, directories and FATs: extraction either works or raises
    SeedFSError (never IndexError, struct.error, UnicodeError...), and never writes outside dest."""
    import random
    import shutil

    src = make_tree(tmp_path / "src", {**CONFIG_DRIVE, "a-long-name-" + "y" * 150 + ".txt": b"x"})
    if kind == "iso":
        img = genisoimage(src, tmp_path / "seed.img", "-J", "-R")
        lo, hi = 16 * SECTOR, 40 * SECTOR
    else:
        options = ("-F", "12") if kind == "fat12" else ("-F", "32", "-s", "1")
        img = vfat_image(src, tmp_path / "seed.img", 1.44 if kind == "fat12" else 34, *options)
        lo, hi = 0, 200_000
    base = img.read_bytes()
    hot = [i for i in range(lo, hi) if base[i]]
    rng = random.Random(1234)
    mutated = tmp_path / "mutated.img"
    shutil.copyfile(img, mutated)
    work = tmp_path / "work"
    out = work / "out"
    outcomes = set()
    with open(mutated, "r+b") as f:
        for _ in range(150):
            spots = [rng.choice(hot) for _ in range(rng.randint(1, 3))]
            for at in spots:
                os.pwrite(f.fileno(), bytes([rng.randrange(256)]), at)
            try:
                extract(str(mutated), str(out), max_total_bytes=1 << 20)
                outcomes.add("ok")
            except SeedFSError:
                outcomes.add("refused")
                assert not out.exists() or listing(out) == []
            assert all(p == "out" or p.startswith("out/") for p in listing(work))
            shutil.rmtree(work, ignore_errors=True)
            for at in spots:
                os.pwrite(f.fileno(), base[at:at + 1], at)
    assert outcomes == {"ok", "refused"}
