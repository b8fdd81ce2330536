"""Extracting ISO 9660 seeds built by genisoimage, xorriso and pycdlib, compared byte for byte."""

from __future__ import annotations

import io
import os

import pytest
from seedfs_helpers import CIDATA, CONFIG_DRIVE, assert_same_tree, genisoimage, make_tree, xorriso_iso

from cloudseed.agent.seedfs import detect_fstype, extract

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
