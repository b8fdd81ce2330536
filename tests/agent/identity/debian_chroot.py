"""A real Debian bookworm tree for the module tests (tests/agent/modules), built once and cached as a tarball.

``debootstrap --variant=minbase bookworm`` from Debian's archive with the tools the identity
modules drive (useradd, sudo/visudo, sshd, ssh-keygen, tzdata, locales, ca-certificates). The
tarball lives in ``~/.cache/cloudseed/identity/`` (or ``$CLOUDSEED_CACHE``); every test session
unpacks a fresh copy, so tests never share state with each other or with the cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from typing import Iterator

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("passwd", "adduser", "sudo", "openssh-server", "openssh-client", "opendoas",
            "tzdata", "locales", "ca-certificates")


def cache_dir() -> str:
    root = os.environ.get("CLOUDSEED_CACHE") or os.path.expanduser("~/.cache/cloudseed")
    path = os.path.join(root, "identity")
    os.makedirs(path, exist_ok=True)
    return path


def tarball_path() -> str:
    key = hashlib.sha256(" ".join([SUITE, MIRROR, *PACKAGES]).encode()).hexdigest()[:12]
    return os.path.join(cache_dir(), f"bookworm-{key}.tar")


def build_tarball() -> str:
    """The cached tarball, debootstrapping it first when it is missing (a few minutes, once)."""
    tarball = tarball_path()
    if os.path.exists(tarball):
        return tarball
    with open(tarball + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(tarball):
            return tarball
        tree = tarball + ".tree"
        shutil.rmtree(tree, ignore_errors=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C.UTF-8",
                   PATH="/usr/sbin:/usr/bin:/sbin:/bin")
        debs = os.path.join(cache_dir(), "debs")
        os.makedirs(debs, exist_ok=True)
        proc = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
                               f"--cache-dir={debs}", SUITE, tree, MIRROR],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise RuntimeError(f"debootstrap failed:\n{tail}")
        # a generic image: no host keys, no apt lists
        for name in os.listdir(os.path.join(tree, "etc/ssh")):
            if name.startswith("ssh_host_"):
                os.unlink(os.path.join(tree, "etc/ssh", name))
        shutil.rmtree(os.path.join(tree, "var/cache/apt/archives"), ignore_errors=True)
        shutil.rmtree(os.path.join(tree, "var/lib/apt/lists"), ignore_errors=True)
        partial = tarball + ".partial"
        with tarfile.open(partial, "w") as tar:
            tar.add(tree, arcname=".")
        os.rename(partial, tarball)
        shutil.rmtree(tree, ignore_errors=True)
    return tarball


def unpack(destination: str) -> str:
    """A fresh copy of the tree in ``destination`` (tar keeps owners, modes and device-free files)."""
    tarball = build_tarball()
    os.makedirs(destination, exist_ok=True)
    subprocess.run(["tar", "-xpf", tarball, "-C", destination, "--numeric-owner"], check=True)
    return destination


@contextlib.contextmanager
def overlay(lowers: list[str], layer_dir: str | None = None) -> Iterator[tuple[str, str]]:
    """A private writable root over the read-only trees ``lowers`` (uppermost first): (root, its upper layer).

    The upper layer (what the root's writes change) lives in ``layer_dir`` when given (a small
    file system, to fill it), else beside the root. Where the kernel has no overlayfs, a full copy
    of the tree is unpacked instead (slower; only for ``lowers`` that are the unpacked tarball).
    """
    work = tempfile.mkdtemp(prefix="cloudseed-module-root-")
    merged = os.path.join(work, "root")
    layers = layer_dir or work
    upper, scratch = os.path.join(layers, "upper"), os.path.join(layers, "work")
    for d in (merged, upper, scratch):
        os.makedirs(d, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                              f"lowerdir={':'.join(lowers)},upperdir={upper},workdir={scratch}", merged],
                             capture_output=True).returncode == 0
    if not mounted:
        if len(lowers) > 1 or layer_dir:
            shutil.rmtree(work, ignore_errors=True)
            raise RuntimeError("overlayfs is needed for a layered or size-limited root")
        unpack(merged)
        upper = merged
    try:
        yield merged, upper
    finally:
        if mounted:
            subprocess.run(["umount", "-l", merged], check=False)
        shutil.rmtree(work, ignore_errors=True)
