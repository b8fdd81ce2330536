"""The cached Debian root filesystem the lab images are made from.

``base_rootfs()`` debootstraps Debian bookworm (minbase) from Debian's archive, installs a
kernel, systemd, OpenSSH, sudo, growpart and Python with PyYAML, and leaves no agent, no SSH host
keys and no machine-id in it. The tree is built once per package list and kept in the cache;
variants (cloudseed installed, the reference cloud-init installed, no agent) are made from it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import sys
from typing import Iterator, Sequence

from cloudseed.lab.cache import build_lock, digest, lab_dir

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = (
    "systemd-sysv", "udev", "dbus", "linux-image-cloud-amd64", "initramfs-tools",
    "openssh-server", "sudo", "e2fsprogs", "fdisk", "cloud-guest-utils", "ifupdown",
    "isc-dhcp-client", "iproute2", "netbase", "python3", "python3-yaml", "procps",
)
_READY = ".cloudseed-rootfs-ready"


class ImageBuildError(Exception):
    """Building a lab root filesystem or disk image failed."""


def log(message: str) -> None:
    print(f"lab: {message}", file=sys.stderr, flush=True)


def run(argv: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    """Run a build command, raising ImageBuildError with the tail of its output on failure."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C.UTF-8",
               PATH="/usr/sbin:/usr/bin:/sbin:/bin")
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env, **kwargs)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ImageBuildError(f"{' '.join(argv[:4])} ... exited {proc.returncode}:\n{tail}")
    return proc


@contextlib.contextmanager
def chroot_mounts(tree: str) -> Iterator[None]:
    """/proc, /sys and /dev mounted in ``tree`` and services kept from starting, while inside."""
    mounted: list[str] = []
    policy = os.path.join(tree, "usr/sbin/policy-rc.d")
    try:
        for source, where, fstype in (("proc", "proc", "proc"), ("sysfs", "sys", "sysfs"),
                                      ("/dev", "dev", None)):
            target = os.path.join(tree, where)
            os.makedirs(target, exist_ok=True)
            argv = ["mount", "--bind", source, target] if fstype is None else \
                ["mount", "-t", fstype, source, target]
            run(argv)
            mounted.append(target)
        with open(policy, "w") as handle:
            handle.write("#!/bin/sh\nexit 101\n")
        os.chmod(policy, 0o755)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(policy)
        for target in reversed(mounted):
            subprocess.run(["umount", "-l", target], check=False)


def base_rootfs(packages: Sequence[str] = BASE_PACKAGES) -> str:
    """The path of the cached base tree for ``packages``, debootstrapping it on first use."""
    key = digest([SUITE, MIRROR, *sorted(packages)])
    tree = os.path.join(lab_dir("rootfs"), f"base-{key}")
    if os.path.exists(os.path.join(tree, _READY)):
        return tree
    with build_lock(f"base-{key}"):
        if os.path.exists(os.path.join(tree, _READY)):
            return tree
        _debootstrap(tree, packages)
    return tree


def _debootstrap(tree: str, packages: Sequence[str]) -> None:
    partial = tree + ".partial"
    if os.path.exists(partial):
        shutil.rmtree(partial)
    debs = lab_dir("debs")
    log(f"debootstrap {SUITE} into {partial} (a few minutes, once)")
    run(["debootstrap", "--variant=minbase", f"--cache-dir={debs}", SUITE, partial, MIRROR])
    with chroot_mounts(partial):
        log("installing kernel, systemd, openssh, python3 in the image")
        run(["chroot", partial, "apt-get", "install", "-y", "-q", "--no-install-recommends",
             *packages])
        run(["chroot", partial, "apt-get", "clean"])
    _make_generic(partial)
    with open(os.path.join(partial, _READY), "w") as handle:
        handle.write(" ".join(packages) + "\n")
    os.rename(partial, tree)
    log(f"base root filesystem ready: {tree}")


def _make_generic(tree: str) -> None:
    """Leave nothing instance-specific in the tree: no host keys, no machine-id, generic names."""
    for key in glob.glob(os.path.join(tree, "etc/ssh/ssh_host_*")):
        os.unlink(key)
    for name, text in (("etc/machine-id", ""), ("etc/hostname", "debian\n"),
                       ("etc/fstab", "/dev/vda1 / ext4 defaults,errors=remount-ro 0 1\n"),
                       ("etc/hosts", "127.0.0.1 localhost\n::1 localhost ip6-localhost\n"),
                       ("etc/network/interfaces",
                        "source /etc/network/interfaces.d/*\nauto lo\niface lo inet loopback\n")):
        path = os.path.join(tree, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
    dbus_id = os.path.join(tree, "var/lib/dbus/machine-id")
    if os.path.lexists(dbus_id):
        os.unlink(dbus_id)
    shutil.rmtree(os.path.join(tree, "var/lib/apt/lists"), ignore_errors=True)
    os.makedirs(os.path.join(tree, "var/lib/apt/lists/partial"), exist_ok=True)


def kernel_files(tree: str) -> tuple[str, str]:
    """(vmlinuz, initrd) paths inside ``tree``."""
    kernels = sorted(glob.glob(os.path.join(tree, "boot/vmlinuz-*")))
    initrds = sorted(glob.glob(os.path.join(tree, "boot/initrd.img-*")))
    if not kernels or not initrds:
        raise ImageBuildError(f"no kernel or initrd under {tree}/boot")
    return kernels[-1], initrds[-1]
