"""resizefs: grow the root filesystem to fill its (grown) partition.

``resize_rootfs: true`` (default) resizes before any module that could care runs; ``noblock``
starts the resize in the background and lets the boot go on; ``false`` does nothing. ext2/3/4
(resize2fs), xfs (xfs_growfs) and btrfs are handled; the running system only.

In the boot's network stage (sshd waits for it on a first boot) ``true`` starts the resize and
lets the modules ``may_run_beside`` names run meanwhile (they write a few small files: the online grow of a
mounted filesystem is made for that); any other module, a reboot asked for, and the config stage
(or the network stage's end, when no later stage runs in this process) first wait for it, and a
failure is an error of the stage that waited (``_background.py``). Under emulation in the lab
guest the grow from 1 to 4 GiB took 0.17-0.22 s of that stage. Elsewhere (``cloudseed single``)
it resizes at once, as cloud-init does for ``true``.
"""

from __future__ import annotations

from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.agent.modules._mount_table import MountInfoError, block_device, mount_of
from cloudseed.agent.state import PER_BOOT

MODULE = ModuleSpec(
    name="resizefs", stage=STAGE_INIT, frequency=PER_BOOT,
    title="Resize the root filesystem",
    schema={"properties": {"resize_rootfs": {"enum": [True, False, "noblock"]}}},
    examples=(
        """\
#cloud-config
# Grow the root filesystem to fill its partition (the default).
resize_rootfs: true
""",
        """\
#cloud-config
# Grow it in the background, so the boot does not wait for it.
resize_rootfs: noblock
""",
        """\
#cloud-config
resize_rootfs: false
""",
    ),
)


# the init modules that may run while the root filesystem grows: small files in /etc and /home,
# fstab, hostname and services; any other module (disk_setup, a command a user lists after this
# one...) waits for the resize
BESIDE = frozenset({"mounts", "set_hostname", "update_hostname", "update_etc_hosts", "ca_certs", "rsyslog",
                    "users_groups", "ssh", "resolv_conf", "seed_random"})


def may_run_beside(module: str, cfg: dict) -> bool:
    """May ``module`` run with ``cfg`` while the root filesystem grows? ``mounts`` only when it makes
    no swap file (``swap``: the file needs the room, and ``size: auto`` reads the free space)."""
    if module == "mounts" and cfg.get("swap"):
        return False
    return module in BESIDE


def ext_fills_device(device: str) -> bool:
    """Does the ext2/3/4 filesystem on ``device`` already span it? (Then resize2fs would only say
    "Nothing to do": the module runs at every boot, and starting it cost about 0.07 s in the lab
    guest under emulation.) Read from the superblock; False whenever it cannot be read."""
    import os
    import struct

    try:
        fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        sb = os.pread(fd, 1024, 1024)
    except OSError:
        return False
    finally:
        os.close(fd)
    if len(sb) < 0x154 or struct.unpack_from("<H", sb, 0x38)[0] != 0xEF53:
        return False
    blocks_lo, = struct.unpack_from("<I", sb, 0x04)
    log_block, = struct.unpack_from("<I", sb, 0x18)
    incompat, = struct.unpack_from("<I", sb, 0x60)
    blocks_hi = struct.unpack_from("<I", sb, 0x150)[0] if incompat & 0x80 else 0  # INCOMPAT_64BIT
    if log_block > 6:
        return False
    block = 1024 << log_block
    return (blocks_hi << 32 | blocks_lo) >= size // block


def resize_command(fstype: str, device: str, mount_point: str) -> list[str] | None:
    if fstype in ("ext2", "ext3", "ext4"):
        return ["resize2fs", device]
    if fstype == "xfs":
        return ["xfs_growfs", mount_point]
    if fstype == "btrfs":
        return ["btrfs", "filesystem", "resize", "max", mount_point]
    return None


def handle(ctx: ModuleContext) -> None:
    setting = ctx.cfg.get("resize_rootfs", True)
    if setting is False or str(setting).lower() in ("false", "off", "no"):
        ctx.log.info("resize_rootfs is off")
        return
    if not ctx.root.is_live:
        ctx.log.info("offline root: the filesystem is not resized")
        return
    resize_mount(ctx, "/", background=str(setting).lower() == "noblock")


def resize_mount(ctx: ModuleContext, mount_point: str, background: bool = False) -> None:
    """Grow the filesystem mounted at ``mount_point`` to fill its device."""
    try:
        dev_number, fstype, _source = mount_of(mount_point)
        device = f"/dev/{block_device(dev_number)}"
    except MountInfoError as e:
        raise ModuleError(f"resize_rootfs: {e}") from None
    argv = resize_command(fstype, device, mount_point)
    if argv is None:
        ctx.log.info("resize_rootfs: %s filesystems are not resized", fstype)
        return
    if argv[0] == "resize2fs" and ext_fills_device(device):
        ctx.log.info("resize_rootfs: %s (%s) already fills its device", device, fstype)
        return
    if ctx.root.which(argv[0]) is None:
        raise ModuleError(f"resize_rootfs: {argv[0]} is not installed")
    if background:
        ctx.root.spawn(argv)
        ctx.log.info("resizing %s (%s) in the background", device, fstype)
        return
    if ctx.stage == "init" and ctx.background is not None:
        from cloudseed.agent.modules import _background

        _background.start(ctx, argv, " ".join(argv), may_run_beside)
        ctx.log.info("resizing %s (%s) beside the modules after this one", device, fstype)
        return
    proc = ctx.root.run(argv, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise ModuleError(f"resize_rootfs: {' '.join(argv)} exited {proc.returncode}"
                          + (f": {detail[-1]}" if detail else ""))
    ctx.log.info("resized %s (%s)", device, fstype)
