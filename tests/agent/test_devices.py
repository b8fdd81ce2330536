"""Which block devices the seed search reads (``devices._block_devices``), on a made-up sysfs and
udev database: empty drives are not opened (each open of an empty CD/DVD drive took 0.1-0.2 s in
the lab guest under emulation), everything that may hold a filesystem is."""

from __future__ import annotations

import os

from cloudseed.agent import devices


def fake_block(tmp_path, name: str, size: str, number: str, udev: str | None = None, loop_file: bool = False):
    base = tmp_path / "sys" / name
    base.mkdir(parents=True)
    (base / "size").write_text(size + "\n")
    (base / "dev").write_text(number + "\n")
    if loop_file:
        (base / "loop").mkdir()
        (base / "loop" / "backing_file").write_text("/images/seed.iso\n")
    if udev is not None:
        (tmp_path / "udev").mkdir(exist_ok=True)
        (tmp_path / "udev" / f"b{number}").write_text(udev)


def test_empty_drives_and_unused_loops_are_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr(devices, "SYS_BLOCK", str(tmp_path / "sys"))
    monkeypatch.setattr(devices, "UDEV_DATA", str(tmp_path / "udev"))
    # an empty DVD drive: its size reads as 1 GiB; udev's cdrom_id found no disc
    fake_block(tmp_path, "sr0", "2097151", "11:0", "S:cdrom\nE:ID_CDROM=1\nE:ID_CDROM_DVD=1\nE:ID_TYPE=cd\n")
    # a drive with a disc in it
    fake_block(tmp_path, "sr1", "734", "11:1", "E:ID_CDROM=1\nE:ID_CDROM_MEDIA=1\nE:ID_FS_LABEL=cidata\n")
    # a drive udev has not recorded yet: opened, as before
    fake_block(tmp_path, "sr2", "2097151", "11:2")
    fake_block(tmp_path, "vda", "4194304", "254:0", "E:ID_TYPE=disk\n")
    fake_block(tmp_path, "vdb", "0", "254:16")                     # no medium at all
    fake_block(tmp_path, "loop0", "0", "7:0")                      # unused
    fake_block(tmp_path, "loop1", "132", "7:1", loop_file=True)    # attached to an image
    fake_block(tmp_path, "ram0", "8192", "1:0")
    assert devices._block_devices() == ["/dev/loop1", "/dev/sr1", "/dev/sr2", "/dev/vda"]



READ_A_SEED = """
import json, os, sys
from cloudseed.agent.devices import mounted_readonly
with mounted_readonly(sys.argv[1]) as copy:
    files = {name: open(os.path.join(copy, name)).read() for name in sorted(os.listdir(copy))}
    mode = oct(os.stat(copy).st_mode & 0o777)
print(json.dumps({"files": files, "mode": mode, "copy": copy, "left": os.path.exists(copy),
                  "loaded": sorted(m for m in ("tempfile", "shutil", "random", "dataclasses", "inspect")
                                   if m in sys.modules)}))
"""


def test_a_seed_iso_is_read_into_a_private_copy_with_no_tempfile_shutil_or_dataclasses(tmp_path):
    """The local stage reads a seed ISO at every boot (NoCloud, config drive): its private copy on /run
    (0700, removed after) is made and removed without tempfile, shutil, random or dataclasses, whose
    imports were a few tenths of a second under TCG before READY=1."""
    import json
    import subprocess
    import sys

    from tests.agent.seedfs.seedfs_helpers import CIDATA, genisoimage, make_tree

    iso = genisoimage(make_tree(tmp_path / "src", CIDATA), tmp_path / "seed.iso", "-J", "-R")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-c", READ_A_SEED, str(iso)], cwd=repo, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["files"] == {name: data.decode() for name, data in CIDATA.items()}
    assert got["mode"] == "0o700" and got["copy"].startswith("/run/cloudseed-seed-") and not got["left"]
    assert got["loaded"] == []
