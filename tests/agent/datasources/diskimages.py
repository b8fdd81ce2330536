"""Real disk images for the disk datasource tests (AltCloud, RbxCloud, IBMCloud, Proxmox): FAT made
with mkfs.vfat + mcopy, ISO 9660 with genisoimage, attached read-only as loop devices.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess

import pytest


def write_tree(top: str, files: dict[str, str | bytes]) -> str:
    for inner, content in files.items():
        path = os.path.join(top, inner)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
    return top


def make_vfat(src: str, image: str, label: str, volume_id: str | None = None, size_kib: int = 2048) -> str:
    """A FAT image holding ``src``'s tree; ``volume_id`` as ``XXXX-XXXX`` (IBM's 9796-932E)."""
    subprocess.run(["truncate", "-s", f"{size_kib}K", image], check=True)
    argv = ["mkfs.vfat", "-n", label]
    if volume_id:
        argv += ["-i", volume_id.replace("-", "")]
    subprocess.run([*argv, image], check=True, capture_output=True)
    for name in sorted(os.listdir(src)):
        subprocess.run(["mcopy", "-s", "-i", image, os.path.join(src, name), "::"], check=True, capture_output=True)
    return image


def make_iso(src: str, image: str, label: str, *extra: str) -> str:
    subprocess.run(["genisoimage", "-quiet", "-o", image, "-V", label, "-J", "-R", *extra, src], check=True)
    return image


@contextlib.contextmanager
def loop_device(image: str):
    """``image`` attached read-only as a loop device for the duration."""
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("needs root and loop devices")
    device = subprocess.run(["losetup", "-f", "--show", "-r", image], check=True, capture_output=True,
                            text=True).stdout.strip()
    try:
        yield device
    finally:
        subprocess.run(["losetup", "-d", device], check=False)


def generator_verdicts(tmp: str, files: dict[str, str]) -> dict[str, str]:
    """What the shell generator and ``cloudseed generator`` decide for a root holding ``files``
    (the host's devices are what both probe): ``{"shell": "enabled: ...", "python": ...}``."""
    from tests.agent.datasources.cloudlab import CLOUDSEED, GENERATOR

    verdicts = {}
    for kind in ("shell", "python"):
        root = os.path.join(tmp, f"gen-{kind}")
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(os.path.join(root, "etc"))
        write_tree(root, files)
        out = os.path.join(tmp, f"gen-{kind}-out")
        if kind == "shell":
            env = {"CLOUDSEED_ROOT": root, "CLOUDSEED_BIN": CLOUDSEED, "PATH": os.environ["PATH"]}
            argv = ["/bin/sh", GENERATOR, out]
        else:
            env, argv = None, [CLOUDSEED, "--root", root, "generator", out]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        run = os.path.join(root, "run", "cloudseed")
        name = "enabled" if os.path.exists(os.path.join(run, "enabled")) else "disabled"
        with open(os.path.join(run, name)) as f:
            verdicts[kind] = f"{name}: {f.read()}"
    return verdicts
