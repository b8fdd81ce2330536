"""Lab disk images: the cached base tree plus an agent, as a raw disk with one ext4 partition.

``lab_image(agent)`` returns an ``Image`` (raw disk, kernel, initrd) for ``agent`` "cloudseed"
(the working tree's package, keyed by a hash of its sources so the image always carries the
current code), "reference" (Debian's cloud-init) or "none". The disk is an MBR with partition 1
at 1 MiB, made by ``mke2fs -d`` from the tree: no loop device, no root mount needed.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import shutil
import struct
import subprocess
import time
from dataclasses import dataclass

from cloudseed.lab.cache import build_lock, digest, lab_dir
from cloudseed.lab.images import agent_install
from cloudseed.lab.images.rootfs import ImageBuildError, base_rootfs, kernel_files, log, run

PARTITION_OFFSET = 1024 * 1024
IMAGE_VERSION = "4"  # bump when the way images are assembled changes
# deb: cloudseed's .deb installed over Debian's cloud-init; switched: cloudseed installed where Debian's
# cloud-init was, its /etc/cloud kept (what the .deb leaves, without building one: `lab --compare`)
AGENTS = ("cloudseed", "reference", "none", "deb", "switched")


def external_image(path: str) -> Image:
    """Any qcow2/raw cloud image given with ``--image``: booted by its own boot loader."""
    if not os.path.isfile(path):
        raise ImageBuildError(f"--image {path}: no such file")
    return Image(disk=os.path.abspath(path), kernel="", initrd="", agent="external", key="external",
                 install_method="as given")


@dataclass
class Image:
    disk: str  # raw disk image, partition 1 = root
    kernel: str
    initrd: str
    agent: str
    key: str
    install_method: str = ""
    partition_offset: int = PARTITION_OFFSET


def package_hash() -> str:
    """A hash of the cloudseed package sources (every file, by path and content, but the lab's)."""
    items: list[str | bytes] = []
    for dirpath, dirnames, filenames in os.walk(agent_install.PACKAGE_DIR):
        # the lab itself never runs in the guest: editing it must not force an image rebuild
        left_out = shutil.ignore_patterns(*agent_install.NOT_COPIED)(dirpath, dirnames + filenames)
        dirnames[:] = sorted(d for d in dirnames if d not in left_out and
                             os.path.join(dirpath, d) != agent_install.LAB_DIR)
        for name in sorted(filenames):
            if name in left_out:  # what the image's copy leaves out (agent_install.NOT_COPIED)
                continue
            path = os.path.join(dirpath, name)
            items.append(os.path.relpath(path, agent_install.PACKAGE_DIR))
            with open(path, "rb") as handle:
                items.append(handle.read())
    return digest(items)


def lab_image(agent: str = "cloudseed", deb: str | None = None) -> Image:
    """The cached image for ``agent``, building what is missing.

    ``deb`` (for agent ``deb``): a cloudseed .deb (``dpkg-buildpackage -us -uc -b``), installed
    with apt over the reference image's Debian cloud-init, as a user switching an image would.
    """
    if agent not in AGENTS:
        raise ImageBuildError(f"unknown agent {agent!r}: one of {', '.join(AGENTS)}")
    if (agent == "deb") != bool(deb):
        raise ImageBuildError("a .deb is given with agent 'deb', and only then")
    base = base_rootfs()
    parts = [IMAGE_VERSION, os.path.basename(base), agent, agent_install.guest_files_hash()]
    if agent in ("cloudseed", "switched"):
        parts.append(package_hash())
    if agent == "none":
        parts.append(agent_install.PLAIN_IMAGE_VERSION)
    if deb:
        with open(deb, "rb") as handle:
            parts.append(hashlib.sha256(handle.read()).hexdigest())
    key = f"{agent}-{digest(parts)}"
    images = lab_dir("images")
    disk = os.path.join(images, f"{key}.raw")
    with build_lock(f"image-{agent}"):
        if not os.path.exists(disk):
            _build(agent, base, disk, key, deb)
        else:
            os.utime(disk)  # in use: _prune of another checkout's build keeps it
        kernel = os.path.join(images, f"{key}.vmlinuz")
        initrd = os.path.join(images, f"{key}.initrd")
        method_file = os.path.join(images, f"{key}.method")
        method = ""
        if os.path.exists(method_file):
            with open(method_file) as handle:
                method = handle.read().strip()
    return Image(disk=disk, kernel=kernel, initrd=initrd, agent=agent, key=key, install_method=method)


def _reference_tree(base: str) -> str:
    """The base tree with Debian's cloud-init installed by apt (cached)."""
    tree = os.path.join(lab_dir("rootfs"), f"reference-{os.path.basename(base)}")
    if not os.path.exists(os.path.join(tree, ".cloudseed-reference-ready")):
        shutil.rmtree(tree, ignore_errors=True)
        run(["cp", "-a", base, tree + ".partial"])
        agent_install.install_reference(tree + ".partial")
        open(os.path.join(tree + ".partial", ".cloudseed-reference-ready"), "w").close()
        os.rename(tree + ".partial", tree)
    return tree


def _build(agent: str, base: str, disk: str, key: str, deb: str | None = None) -> None:
    images = os.path.dirname(disk)
    stage = os.path.join(lab_dir("staging"), key)
    method = "none"
    log(f"assembling {agent} image {key}")
    if agent == "reference":
        agent_install.copy_tree_linked(_reference_tree(base), stage)
        method = "Debian cloud-init package"
    elif agent == "deb":
        shutil.rmtree(stage, ignore_errors=True)
        run(["cp", "-a", _reference_tree(base), stage])   # a full copy: apt changes files in place
        agent_install.install_deb_over_cloud_init(stage, deb)
        method = "cloudseed .deb installed by apt over Debian's cloud-init"
    else:
        agent_install.copy_tree_linked(base, stage)
        if agent in ("cloudseed", "switched"):
            method = agent_install.install_cloudseed(stage)
        else:
            agent_install.install_host_keygen(stage)
        if agent == "switched":
            agent_install.keep_cloud_init_config(_reference_tree(base), stage)
            method += "; Debian cloud-init's /etc/cloud kept"
    agent_install.install_collector(stage)
    agent_install.install_lab_helper(stage)
    try:
        kernel, initrd = kernel_files(stage)
        shutil.copyfile(kernel, os.path.join(images, f"{key}.vmlinuz"))
        shutil.copyfile(initrd, os.path.join(images, f"{key}.initrd"))
        make_disk(stage, disk)
        with open(os.path.join(images, f"{key}.method"), "w") as handle:
            handle.write(method + "\n")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    _prune(images, agent, keep=key)
    log(f"image ready: {disk} ({method})")


def _tree_bytes(tree: str) -> int:
    proc = subprocess.run(["du", "-sb", "--apparent-size", tree], capture_output=True, text=True)
    return int(proc.stdout.split()[0]) if proc.returncode == 0 else 2 << 30


def make_disk(tree: str, disk: str) -> None:
    """A raw disk: MBR with one Linux partition at 1 MiB holding an ext4 made from ``tree``."""
    size_mib = max(1024, (_tree_bytes(tree) * 14 // 10) // (1 << 20) + 256)
    total = size_mib << 20
    partial = disk + ".partial"
    with open(partial, "wb") as handle:
        handle.truncate(total)
    fs_kib = (total - PARTITION_OFFSET) // 1024
    run(["mke2fs", "-q", "-F", "-t", "ext4", "-L", "cloudseed-root", "-E",
         f"offset={PARTITION_OFFSET}", "-d", tree, partial, f"{fs_kib}k"])
    write_mbr(partial, PARTITION_OFFSET // 512, (total - PARTITION_OFFSET) // 512)
    os.replace(partial, disk)


def write_mbr(disk: str, start_sector: int, sectors: int) -> None:
    """An MBR partition table with one bootable-agnostic Linux (0x83) partition."""
    entry = struct.pack("<B3sB3sII", 0x00, b"\xfe\xff\xff", 0x83, b"\xfe\xff\xff", start_sector, sectors)
    with open(disk, "r+b") as handle:
        handle.seek(440)
        handle.write(struct.pack("<I", 0x636C6F75) + b"\0\0")  # disk signature
        handle.write(entry + b"\0" * 48 + b"\x55\xaa")


KEEP_RECENT_IMAGES = 4  # per agent, besides the one just built
IN_USE_SECONDS = 3600  # an image used this recently may back a running VM's overlay


def _prune(images: str, agent: str, keep: str) -> None:
    """Drop older images of the same agent (the cloudseed image changes with every source edit).

    Several checkouts (worktrees, a CI clone) can share one cache, each with its own image: the
    few most recently used images, and any used within the hour, are kept, so one checkout's
    build never deletes the disk under another's running VM.
    """
    now = time.time()
    disks = [path for path in glob.glob(os.path.join(images, f"{agent}-*.raw"))
             if not os.path.basename(path).startswith(keep)]
    disks.sort(key=os.path.getmtime, reverse=True)
    for disk in disks[KEEP_RECENT_IMAGES:]:
        if now - os.path.getmtime(disk) < IN_USE_SECONDS:
            continue
        stem = disk[:-len(".raw")]
        for path in (disk, f"{stem}.vmlinuz", f"{stem}.initrd", f"{stem}.method"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
