"""Labels read from superblocks agree with blkid, for every tool that makes seeds (ours included)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cloudseed.agent.seedfs import read_label
from tests.agent.seedfs.seedfs_helpers import genisoimage, make_tree, vfat_image, xorriso_iso

FILES = {"meta-data": b"instance-id: x\n", "user-data": b"#cloud-config\n"}


def blkid_label(path) -> tuple[str, str]:
    out = subprocess.run(["blkid", "-c", "/dev/null", "-o", "export", str(path)], capture_output=True,
                         text=True).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return values.get("TYPE", ""), values.get("LABEL", "")


@pytest.mark.parametrize("label", ["cidata", "CIDATA", "config-2"])
def test_iso_labels(tmp_path, label):
    src = make_tree(tmp_path / "src", FILES)
    for image in (genisoimage(src, tmp_path / "g.iso", "-J", "-R", label=label),
                  xorriso_iso(src, tmp_path / "x.iso", label=label)):
        assert read_label(str(image)) == ("iso9660", label) == blkid_label(image)


@pytest.mark.parametrize("fat_bits,size_mb", [("12", 2), ("16", 20), ("32", 40)])
def test_fat_labels(tmp_path, fat_bits, size_mb):
    src = make_tree(tmp_path / "src", FILES)
    image = vfat_image(src, tmp_path / "f.img", size_mb, "-F", fat_bits, label="CONFIG-2")
    assert read_label(str(image)) == ("vfat", "CONFIG-2") == blkid_label(image)


@pytest.mark.parametrize("fs", ["iso9660", "vfat"])
def test_labels_of_our_seed_builder(tmp_path, fs):

    out = tmp_path / f"seed.{fs}"  # built by `cloudseed seed build`, the seed builder under test
    subprocess.run([sys.executable, "-m", "cloudseed", "seed", "build", "--kind", "nocloud", "--fs", fs, "-o", str(out),
                    "--instance-id", "iid-label"], check=True, capture_output=True)
    fstype, label = read_label(str(out))
    assert (fstype, label.lower()) == (fs, "cidata")
    assert blkid_label(out)[1].lower() == "cidata"


def test_not_a_seed_filesystem(tmp_path):
    blank = tmp_path / "zeros"
    blank.write_bytes(b"\0" * 65536)
    assert read_label(str(blank)) is None
    assert read_label(str(tmp_path / "missing")) is None
