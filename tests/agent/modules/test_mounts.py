"""mounts: fstab lines in temporary roots and in a debootstrapped Debian root checked with findmnt --verify.

The fstab written into the Debian root is verified by util-linux's ``findmnt --verify`` run inside
that root (chrooted), with a real ext4 loop device (its node made in the root's /dev) and a real
swap file made by the module with fallocate and mkswap. The commands only meaningful on the
running system (swapon -a, systemctl daemon-reload, mount -a) are not run on these roots: the
tests assert the command lines the module logs instead.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess

import pytest

from tests.agent.modules.blank_disks import blkid
from tests.agent.modules.module_support import InputDatasource, run

IMAGE_FSTAB = ("# the image's own lines\nUUID=1234-abcd\t/\text4\terrors=remount-ro\t0\t1\n\n"
               "/dev/sr0  /media/cdrom0  udf,iso9660  user,noauto  0  0\n")
OURS = "comment=cloudconfig"


def ours(root) -> list[list[str]]:
    return [line.split("\t") for line in root.read_text("/etc/fstab").splitlines() if OURS in line]


def test_image_lines_kept_and_a_second_run_is_byte_identical(target):
    target.write("/etc/fstab", IMAGE_FSTAB)
    cfg = {"mounts": [["LABEL=data", "/srv/data", "ext4"], ["server:/export", "/mnt/nfs", "nfs", "rw,vers=4", 0, 0]]}
    result, _ = run(target, "mounts", cfg, stage="init")
    assert result.status == "ok", result.reason
    first = target.read_bytes("/etc/fstab")
    assert first.decode().startswith(IMAGE_FSTAB)  # byte for byte, blank line and spacing included
    assert ours(target) == [["LABEL=data", "/srv/data", "ext4", "defaults,nobootwait," + OURS, "0", "2"],
                            ["server:/export", "/mnt/nfs", "nfs", "rw,vers=4," + OURS, "0", "0"]]
    assert target.isdir("/srv/data") and target.isdir("/mnt/nfs")
    mtime = os.stat(target.path("/etc/fstab")).st_mtime_ns
    result, _ = run(target, "mounts", cfg, stage="init")
    assert result.status == "ok"
    assert target.read_bytes("/etc/fstab") == first
    assert os.stat(target.path("/etc/fstab")).st_mtime_ns == mtime  # not even rewritten


def test_a_later_run_replaces_only_its_own_lines(target):
    old = IMAGE_FSTAB + "/dev/vdb\t/old\tauto\tdefaults,nofail,comment=cloudconfig\t0\t2\n"  # e.g. cloud-init's
    target.write("/etc/fstab", old)
    result, _ = run(target, "mounts", {"mounts": [["LABEL=new", "/new"]],
                                       "mount_default_fields": [None, None, "xfs", "noatime", "0", "0"]},
                    stage="init")
    assert result.status == "ok", result.reason
    text = target.read_text("/etc/fstab")
    assert text.startswith(IMAGE_FSTAB) and "/old" not in text
    assert ours(target) == [["LABEL=new", "/new", "xfs", "noatime," + OURS, "0", "0"]]


def test_a_device_the_image_already_mounts_is_left_to_it(target):
    target.write("/etc/fstab", "LABEL=data /srv auto defaults 0 2\n")
    result, _ = run(target, "mounts", {"mounts": [["LABEL=data", "/elsewhere"]]}, stage="init")
    assert result.status == "ok"
    assert target.read_text("/etc/fstab") == "LABEL=data /srv auto defaults 0 2\n"


def test_short_names_removal_and_systemd_defaults(target, loop_disk):  # noqa: F811
    disk = loop_disk(8)
    os.makedirs(target.path("/lib/systemd"))
    with open(target.path("/lib/systemd/systemd"), "w"):
        pass
    cfg = {"mounts": [[disk, "/a"], ["sdq", "/b"], [disk, None], [disk, "/c", "ext4", "ro", "1", "1"]]}
    result, _ = run(target, "mounts", cfg, stage="init")
    assert result.status == "ok", result.reason
    assert ours(target) == [
        ["/dev/sdq", "/b", "auto", "defaults,nofail,x-systemd.requires=cloudseed-network.service,_netdev," + OURS,
         "0", "2"],
        [disk, "/c", "ext4", "ro," + OURS, "1", "1"]]


def test_ephemeral0_and_swap_from_the_block_device_mapping(target, loop_disk):  # noqa: F811
    ephemeral, swap = loop_disk(8), loop_disk(8)
    ds = InputDatasource(metadata={"block-device-mapping": {"ami": "sda1", "ephemeral0": ephemeral, "swap": swap}})
    result, _ = run(target, "mounts", {"mounts": [["ephemeral0", "/mnt", "auto", "defaults,noexec"]]},
                    datasource=ds, stage="init")
    assert result.status == "ok", result.reason
    assert ours(target) == [[ephemeral, "/mnt", "auto", "defaults,noexec," + OURS, "0", "2"],
                            [swap, "none", "swap", "sw," + OURS, "0", "0"]]
    result, ctx = run(target, "mounts", {"mounts": [["ephemeral1", "/mnt2"]]}, datasource=ds, stage="init")
    assert any("ephemeral1" in w and "no fstab line" in w for w in ctx.warnings)


def test_commands_are_logged_not_run_on_another_root(target, caplog):
    caplog.set_level(logging.INFO, logger="cloudseed.modules.mounts")
    run(target, "mounts", {"mounts": [["LABEL=x", "/x"]]}, stage="init")
    text = caplog.text
    assert "not running systemctl daemon-reload" in text and "not running mount -a" in text


@pytest.mark.parametrize("cfg,words", [
    ({"mounts": "sdb /data"}, "mounts: expected a list"),
    ({"mounts": [["LABEL=ok", "/ok"], "sdb /data"]}, "mounts[1]: expected a list of 1 to 6"),
    ({"mounts": [[{"dev": "x"}, "/x"]]}, "mounts[0][0]: expected a string"),
    ({"mounts": [["LABEL=a", "/a"]], "mount_default_fields": [None, None]}, "mount_default_fields: expected 6"),
    ({"swap": "2G"}, "swap: expected a mapping"),
    ({"swap": {"filename": "/swapfile", "size": "lots"}}, "swap.size: 'lots' is not a size"),
    ({"swap": {"filename": "relative", "size": "1M"}}, "swap.filename: expected an absolute path"),
])
def test_bad_input_changes_nothing(target, cfg, words):
    target.write("/etc/fstab", IMAGE_FSTAB)
    result, _ = run(target, "mounts", cfg, stage="init")
    assert result.status == "failed" and words in result.reason, result.reason
    assert target.read_text("/etc/fstab") == IMAGE_FSTAB


def test_swap_tool_missing_leaves_no_file(target):
    result, _ = run(target, "mounts", {"swap": {"filename": "/swapfile", "size": "4M"}}, stage="init")
    assert result.status == "failed" and "command not found on the target" in result.reason
    assert target.listdir("/") == ["etc"] and not target.exists("/etc/fstab")


def test_existing_non_swap_file_is_not_overwritten(target):
    target.write("/swapfile", "precious data\n")
    result, _ = run(target, "mounts", {"swap": {"filename": "/swapfile", "size": "4M"}}, stage="init")
    assert result.status == "failed" and "is not a swap file" in result.reason
    assert target.read_text("/swapfile") == "precious data\n"


def test_fstab_and_swap_file_verified_in_a_debian_root(debian_root, loop_disk):  # noqa: F811
    disk = loop_disk(16)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "verified", disk], check=True)
    node = debian_root.path(disk)
    os.makedirs(os.path.dirname(node), exist_ok=True)
    if not os.path.exists(node):
        os.mknod(node, 0o600 | stat.S_IFBLK, os.stat(disk).st_rdev)
    image_lines = debian_root.read_text("/etc/fstab", default="")
    cfg = {"mounts": [[disk, "/srv/verified", "ext4"]], "swap": {"filename": "/var/swap.img", "size": "24M"}}
    result, _ = run(debian_root, "mounts", cfg, stage="init")
    assert result.status == "ok", result.reason
    text = debian_root.read_text("/etc/fstab")
    assert text.startswith(image_lines)
    os.makedirs(debian_root.path("/proc"), exist_ok=True)  # findmnt reads /proc/filesystems
    subprocess.run(["mount", "-t", "proc", "proc", debian_root.path("/proc")], check=True)
    try:
        verify = debian_root.run(["findmnt", "--verify", "--tab-file", "/etc/fstab"], check=False)
    finally:
        subprocess.run(["umount", debian_root.path("/proc")], check=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "0 parse errors, 0 errors" in verify.stderr  # the one warning: a swap file is a regular file
    swap = debian_root.path("/var/swap.img")
    assert os.stat(swap).st_size == 24 * 2**20
    assert stat.S_IMODE(os.stat(swap).st_mode) == 0o600
    assert blkid(swap, "TYPE") == "swap"
    assert "/var/swap.img\tnone\tswap\tsw," + OURS + "\t0\t0" in text
    inode = os.stat(swap).st_ino
    result, _ = run(debian_root, "mounts", cfg, stage="init")  # a second run: same file, same fstab
    assert result.status == "ok" and debian_root.read_text("/etc/fstab") == text
    assert os.stat(swap).st_ino == inode


def test_swap_size_auto_follows_the_documented_rule(debian_root):
    from cloudseed.agent.modules._swapfile import GIB, MIB, suggested_size

    assert suggested_size(2 * GIB) == 2 * GIB
    assert suggested_size(8 * GIB) == 4 * GIB
    assert suggested_size(64 * GIB) == 8 * GIB
    assert suggested_size(2 * GIB, maxsize=512 * MIB) == 512 * MIB
    assert suggested_size(2 * GIB, free=1 * GIB) == 256 * MIB  # a quarter of the free space
    assert suggested_size(2 * GIB, maxsize=4 * GIB, free=1 * GIB) == int(GIB * 0.9)
    result, _ = run(debian_root, "mounts", {"swap": {"filename": "/swap.auto", "size": "auto", "maxsize": "8M"}},
                    stage="init")
    assert result.status == "ok", result.reason
    assert os.stat(debian_root.path("/swap.auto")).st_size == 8 * MIB
