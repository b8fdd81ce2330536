"""Extracting ISO 9660 seeds built by genisoimage, xorriso and pycdlib, compared byte for byte."""

from __future__ import annotations

import io
import os
import struct

import pytest

from cloudseed.agent.seedfs import SeedFSError, detect_fstype, extract
from tests.agent.seedfs.seedfs_helpers import (
    CIDATA,
    CONFIG_DRIVE,
    assert_same_tree,
    genisoimage,
    make_tree,
    xorriso_iso,
)

LONG_NAME = "a-very-long-file-name-" + "x" * 150 + ".yaml"  # its NM entry needs a CE continuation area
RICH = {
    **CIDATA,
    "empty": b"",
    "café/ünïcode-näme.txt": "grüße\n".encode(),
    "scripts/per-boot/10-hello.sh": b"#!/bin/sh\necho hello\n",
    "big.bin": os.urandom(700_000),
    "UPPER.TXT": b"upper case stays upper case with Rock Ridge and Joliet\n",
    "name.with.dots.and-dash": b"x",
}


@pytest.fixture
def rich(tmp_path):
    return make_tree(tmp_path / "src", RICH, dirs=("empty-dir",))


def test_cidata_joliet_and_rock_ridge(tmp_path, rich):
    (rich / LONG_NAME).write_bytes(b"long\n")
    iso = genisoimage(rich, tmp_path / "seed.iso", "-J", "-R")
    assert b"CE\x1c\x01" in iso.read_bytes()  # the long name really uses a continuation area
    assert detect_fstype(str(iso)) == "iso9660"
    out = tmp_path / "out"
    assert_same_tree(rich, out, extract(str(iso), str(out)))


def test_rock_ridge_only(tmp_path, rich):
    (rich / LONG_NAME).write_bytes(b"long\n")
    iso = genisoimage(rich, tmp_path / "seed.iso", "-R")
    out = tmp_path / "out"
    assert_same_tree(rich, out, extract(str(iso), str(out)))


def test_rock_ridge_skips_symlinks(tmp_path, rich):
    os.symlink("/etc/shadow", rich / "link")
    iso = genisoimage(rich, tmp_path / "seed.iso", "-R")
    out = tmp_path / "out"
    returned = extract(str(iso), str(out))
    os.unlink(rich / "link")
    assert not os.path.lexists(out / "link")
    assert_same_tree(rich, out, returned)


def test_rock_ridge_deep_directories_relocated(tmp_path):
    deep = "/".join(f"level{i}" for i in range(12))
    src = make_tree(tmp_path / "src", {f"{deep}/deep.txt": b"deep\n", "top.txt": b"top\n"})
    iso = genisoimage(src, tmp_path / "seed.iso", "-R")
    assert b"rr_moved" in iso.read_bytes()  # genisoimage moved the deep directories (CL/RE/PL entries)
    out = tmp_path / "out"
    returned = extract(str(iso), str(out))
    # like a kernel mount, the (now empty) rr_moved directory itself is visible
    assert_same_tree(src, out, returned, extra_dirs=("rr_moved",))


def test_joliet_only(tmp_path):
    files = {
        **CIDATA,
        "Mixed Case Name.Json": b"{}",
        "café/ünïcode-näme.txt": "grüße\n".encode(),
        "openstack/latest/meta_data.json": b"{}",
        "empty": b"",
    }
    src = make_tree(tmp_path / "src", files)
    iso = genisoimage(src, tmp_path / "seed.iso", "-J")
    out = tmp_path / "out"
    assert_same_tree(src, out, extract(str(iso), str(out)))


def test_plain_level1_names_are_lowercased(tmp_path):
    # names already valid ISO level 1 (8.3, no dashes), so the lowercased ISO names match exactly
    files = {"metadata": b"instance-id: x\n", "userdata": b"#cloud-config\n", "config/net.cfg": b"v2\n",
             "config/sub/deeper/data.bin": os.urandom(5000), "empty.txt": b""}
    src = make_tree(tmp_path / "src", files)
    iso = genisoimage(src, tmp_path / "seed.iso")
    data = iso.read_bytes()
    assert b"METADATA.;1" in data and b"NET.CFG;1" in data
    out = tmp_path / "out"
    assert_same_tree(src, out, extract(str(iso), str(out)))


def test_config_drive_iso_by_xorriso(tmp_path):
    src = make_tree(tmp_path / "src", CONFIG_DRIVE)
    iso = xorriso_iso(src, tmp_path / "config-2.iso", "-J", "-R")
    out = tmp_path / "out"
    assert_same_tree(src, out, extract(str(iso), str(out)))


def _pycdlib_image(path, *, joliet: bool, rock_ridge: bool, files: dict[str, tuple[str, str, bytes]]):
    """files: ISO path -> (Rock Ridge name, Joliet name, data); all in the root directory."""
    import pycdlib

    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3 if joliet else None, rock_ridge="1.09" if rock_ridge else None,
            vol_ident="cidata")
    iso.add_directory("/DIR", rr_name="dir" if rock_ridge else None, joliet_path="/dir" if joliet else None)
    for iso_path, (rr_name, joliet_name, data) in files.items():
        iso.add_fp(io.BytesIO(data), len(data), iso_path, rr_name=rr_name if rock_ridge else None,
                   joliet_path=joliet_name if joliet else None)
    iso.write(str(path))
    iso.close()


def test_rock_ridge_names_win_over_joliet(tmp_path):
    files = {
        "/USERDATA.;1": ("user-data", "/joliet-user-data", b"#cloud-config\n"),
        "/DIR/META.;1": ("meta-data", "/dir/joliet-meta", b"instance-id: a\n"),
    }
    _pycdlib_image(tmp_path / "both.iso", joliet=True, rock_ridge=True, files=files)
    out = tmp_path / "out"
    assert sorted(extract(str(tmp_path / "both.iso"), str(out))) == ["dir/meta-data", "user-data"]
    assert (out / "dir/meta-data").read_bytes() == b"instance-id: a\n"


def test_joliet_names_win_over_iso_names(tmp_path):
    files = {
        "/USERDATA.;1": ("user-data", "/User-Data", b"#cloud-config\n"),
        "/DIR/META.;1": ("meta-data", "/dir/Meta-Data", b"instance-id: a\n"),
    }
    _pycdlib_image(tmp_path / "joliet.iso", joliet=True, rock_ridge=False, files=files)
    out = tmp_path / "out"
    assert sorted(extract(str(tmp_path / "joliet.iso"), str(out))) == ["User-Data", "dir/Meta-Data"]


def test_iso_names_without_extensions_lose_version_and_dot(tmp_path):
    files = {"/USERDATA.;1": ("", "", b"u"), "/DIR/META.;1": ("", "", b"m"), "/NET.CFG;1": ("", "", b"n")}
    _pycdlib_image(tmp_path / "plain.iso", joliet=False, rock_ridge=False, files=files)
    out = tmp_path / "out"
    assert sorted(extract(str(tmp_path / "plain.iso"), str(out))) == ["dir/meta", "net.cfg", "userdata"]
    assert (out / "net.cfg").read_bytes() == b"n"


def _split_into_extents(iso, name: bytes, *, finish: bool = True) -> None:
    """Rewrite the root directory record ``name`` (a 2-sector file) as a two-record multi-extent file.

    No tool writes multi-extent files below 4 GiB, so the records are made by hand (ECMA-119 9.1.6).
    With ``finish=False`` only the first record, flagged "more extents follow", is left.
    """
    raw = bytearray(iso.read_bytes())
    pvd = 16 * 2048
    root_lba = struct.unpack_from("<I", raw, pvd + 156 + 2)[0]
    root_size = struct.unpack_from("<I", raw, pvd + 156 + 10)[0]
    start = root_lba * 2048
    directory = bytes(raw[start:start + root_size])
    at = directory.find(bytes([len(name)]) + name) - 32
    rec = bytearray(directory[at:at + directory[at]])
    lba, size = struct.unpack_from("<I", rec, 2)[0], struct.unpack_from("<I", rec, 10)[0]
    assert size == 4096
    first, second = bytearray(rec), bytearray(rec)
    first[10:18] = struct.pack("<I", 2048) + struct.pack(">I", 2048)
    first[25] |= 0x80
    second[2:10] = struct.pack("<I", lba + 1) + struct.pack(">I", lba + 1)
    second[10:18] = struct.pack("<I", 2048) + struct.pack(">I", 2048)
    records = bytes(first + second) if finish else bytes(first)
    new = directory[:at] + records + directory[at + len(rec):]
    assert not any(new[root_size:])  # only padding falls off the end of the sector
    new = new[:root_size].ljust(root_size, b"\0")
    raw[start:start + root_size] = new
    iso.write_bytes(bytes(raw))


def test_multi_extent_file(tmp_path):
    data = os.urandom(4096)
    src = make_tree(tmp_path / "src", {"data.bin": data, "other": b"o"})
    iso = genisoimage(src, tmp_path / "seed.iso")
    _split_into_extents(iso, b"DATA.BIN;1")
    out = tmp_path / "out"
    assert sorted(extract(str(iso), str(out))) == ["data.bin", "other"]
    assert (out / "data.bin").read_bytes() == data


def test_multi_extent_file_without_last_extent(tmp_path):
    src = make_tree(tmp_path / "src", {"data.bin": os.urandom(4096)})
    iso = genisoimage(src, tmp_path / "seed.iso")
    _split_into_extents(iso, b"DATA.BIN;1", finish=False)
    with pytest.raises(SeedFSError, match="multi-extent"):
        extract(str(iso), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_directory_data_budget(tmp_path, monkeypatch):
    import cloudseed.agent.seedfs.plan as plan  # the limit lives with the Plan that enforces it

    src = make_tree(tmp_path / "src", {f"d{i}/f": b"x" for i in range(4)})
    iso = genisoimage(src, tmp_path / "seed.iso", "-J", "-R")
    monkeypatch.setattr(plan, "MAX_METADATA_BYTES", 3 * 2048)
    with pytest.raises(SeedFSError, match="directory data"):
        extract(str(iso), str(tmp_path / "out"))
