"""End to end: a lab boot with a second, empty disk that user-data partitions, formats and mounts.

The VM gets a blank 256 MiB disk as ``vdb`` (before the NoCloud seed). user-data asks
``disk_setup`` for a GPT table, ``fs_setup`` for two ext4 filesystems, ``mounts`` for their fstab
lines and a swap file; runcmd records what the guest sees mounted and writes a file onto the new
filesystem. Everything is checked from outside after power-off: the root disk is read back with
debugfs, the data disk's table with sfdisk and its filesystem with debugfs at the partition's
offset. A second boot of the same instance leaves fstab byte for byte as it was, and the
filesystem is mounted again by the system itself (from fstab). The default (ci) set runs this
GPT scenario; ``CLOUDSEED_E2E=all`` adds an MBR one with a swap partition.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from cloudseed.lab.images.readback import GuestDisk
from tests.e2e.guest import BOOT_TIMEOUT, read_disk, spec

OURS = "comment=cloudconfig"
RECORD = ("findmnt -n -o SOURCE,FSTYPE /srv/e2edata > /var/tmp/e2e-disks.txt; "
          "findmnt -n -o SOURCE /srv/more >> /var/tmp/e2e-disks.txt; "
          "swapon --show=NAME --noheadings >> /var/tmp/e2e-disks.txt; "
          "echo written-in-guest > /srv/e2edata/hello.txt")
GPT_USER_DATA = f"""#cloud-config
bootcmd:
  - [sh, -c, "o=/var/tmp/e2e-boot-mounts.txt; findmnt -n -o SOURCE /srv/e2edata >> $o || echo none >> $o"]
disk_setup:
  /dev/vdb:
    table_type: gpt
    layout: [[70, 83], 30]
fs_setup:
  - device: /dev/vdb
    partition: 1
    filesystem: ext4
    label: e2edata
  - device: /dev/vdb.2
    filesystem: ext4
    label: e2emore
mounts:
  - [LABEL=e2edata, /srv/e2edata, ext4, "defaults,nofail", "0", "2"]
  - [vdb2, /srv/more]
swap:
  filename: /swapfile
  size: 48M
runcmd:
  - [sh, -c, "{RECORD}"]
""".encode()


def blank_disk(directory: str, size_mib: int = 256) -> str:
    path = os.path.join(directory, "data.raw")
    with open(path, "wb") as handle:
        handle.truncate(size_mib * 2**20)
    return path


def boot(lab, workdir: str, data: bytes, disk: str, overlay=None):
    from cloudseed.lab.boots.session import run_boot
    from cloudseed.provider.seeds.build import build_seed

    image, accel, reason = lab
    instance = spec("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e disks@e2e",
                    instance_id="iid-e2e-disks", marker="disks", data=data)
    seed = os.path.join(workdir, "seed.iso")
    build_seed("nocloud", "iso9660", instance, seed)
    result = run_boot(image, workdir, accel=accel, accel_reason=reason, seeds=[seed], overlay=overlay,
                      timeout=BOOT_TIMEOUT, disks=[disk])
    assert not result.timed_out, f"agent did not finish; console: {result.console_log}"
    return result


def module_results(result) -> dict:
    """Module name -> its record, from the agent's status as the lab collector reported it."""
    found = {}
    stages = (result.status or {}).get("stages") or {}
    for stage in stages.values():
        for module in stage.get("modules") or []:
            found[module.get("name")] = module
    return found


def partitions(disk: str) -> list[dict]:
    out = subprocess.run(["sfdisk", "--json", disk], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["partitiontable"]["partitions"]


def test_gpt_disk_filesystems_mounts_and_swap_survive_a_reboot(lab, tmp_path):
    workdir = str(tmp_path)
    disk = blank_disk(workdir)
    first = boot(lab, workdir, GPT_USER_DATA, disk)
    status = first.status or {}
    assert status.get("errors") == [], status
    modules = module_results(first)
    for name in ("disk_setup", "mounts"):
        assert modules.get(name, {}).get("status") == "ok", modules.get(name)
    assert not [w for w in status.get("warnings") or [] if w.startswith(("disk_setup", "mounts"))], status
    with read_disk(first) as root:
        fstab = root.text("/etc/fstab")
        seen = root.text("/var/tmp/e2e-disks.txt")
        swap = root.stat("/swapfile")
    ours = [line.split("\t") for line in fstab.splitlines() if OURS in line]
    assert [f[:3] for f in ours] == [["LABEL=e2edata", "/srv/e2edata", "ext4"], ["/dev/vdb2", "/srv/more", "auto"],
                                     ["/swapfile", "none", "swap"]], fstab
    assert seen is not None and seen.split() == ["/dev/vdb1", "ext4", "/dev/vdb2", "/swapfile"], seen
    assert swap is not None and swap.size == 48 * 2**20 and swap.mode & 0o777 == 0o600
    table = partitions(disk)
    assert [p["type"] for p in table] == ["0FC63DAF-8483-4772-8E79-3D69D8477DE4"] * 2
    with GuestDisk(disk, offset=table[0]["start"] * 512) as data:
        assert data.text("/hello.txt") == "written-in-guest\n"

    second = boot(lab, workdir, GPT_USER_DATA, disk, overlay=first.overlay)
    assert (second.status or {}).get("errors") == [], second.status
    with read_disk(second) as root:
        assert root.text("/etc/fstab") == fstab  # byte for byte
        assert root.text("/var/tmp/e2e-boot-mounts.txt").split() == ["none", "/dev/vdb1"]
        assert root.text("/var/tmp/e2e-disks.txt") == seen  # runcmd ran once (per instance)


MBR_USER_DATA = b"""#cloud-config
disk_setup:
  /dev/vdb:
    table_type: mbr
    layout: [[60, 83], [40, 82]]
fs_setup:
  - {device: /dev/vdb, partition: auto, filesystem: ext4, label: mbrdata}
  - {device: /dev/vdb.2, filesystem: swap, label: mbrswap}
mounts:
  - [LABEL=mbrdata, /data]
  - [vdb2, none, swap, sw, "0", "0"]
runcmd:
  - [sh, -c, "o=/var/tmp/e2e-mbr.txt; findmnt -n -o SOURCE /data > $o; swapon --show=NAME --noheadings >> $o"]
"""


@pytest.mark.e2e_extra
def test_mbr_disk_with_a_swap_partition(lab, tmp_path):
    disk = blank_disk(str(tmp_path), 128)
    result = boot(lab, str(tmp_path), MBR_USER_DATA, disk)
    assert (result.status or {}).get("errors") == [], result.status
    assert [p["type"] for p in partitions(disk)] == ["83", "82"]
    with read_disk(result) as root:
        assert root.text("/var/tmp/e2e-mbr.txt").split() == ["/dev/vdb1", "/dev/vdb2"]
