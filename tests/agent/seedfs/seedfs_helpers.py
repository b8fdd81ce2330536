"""Helpers for the seedfs tests: source trees, real image builders (genisoimage, xorriso,
mkfs.vfat + mtools) and a byte-for-byte tree comparison."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

MTOOLS_ENV = {**os.environ, "MTOOLS_SKIP_CHECK": "1"}

CIDATA = {
    "meta-data": b"instance-id: iid-local01\nlocal-hostname: seeded\n",
    "user-data": b"#cloud-config\npassword: secret\nchpasswd: { expire: False }\n",
    "network-config": b"version: 2\nethernets:\n  eth0:\n    dhcp4: true\n",
    "vendor-data": b"",
}

CONFIG_DRIVE = {
    "openstack/latest/meta_data.json": b'{"uuid": "83679162-1378-4288-a2d4-70e13ec132aa", "hostname": "cd"}',
    "openstack/latest/user_data": b"#cloud-config\nruncmd: [echo hi]\n",
    "openstack/latest/network_data.json": b'{"links": [], "networks": [], "services": []}',
    "openstack/latest/vendor_data.json": b"{}",
    "openstack/2012-08-10/meta_data.json": b'{"uuid": "83679162-1378-4288-a2d4-70e13ec132aa"}',
    "openstack/2012-08-10/user_data": b"#cloud-config\n",
    "openstack/content/0000": b"file injected by nova\n",
    "ec2/latest/meta-data.json": b'{"instance-id": "i-0001", "hostname": "cd"}',
    "ec2/2009-04-04/meta-data.json": b'{"instance-id": "i-0001"}',
}


def run(*argv: str, env: dict | None = None) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, env=env)


def make_tree(root: Path, files: dict[str, bytes], dirs: tuple[str, ...] = ()) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for rel in dirs:
        (root / rel).mkdir(parents=True, exist_ok=True)
    return root


def tree_of(root: Path) -> tuple[dict[str, bytes], set[str]]:
    """(files with contents, directories) under ``root``, relative paths."""
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for d in dirnames:
            dirs.add(os.path.normpath(os.path.join(rel_dir, d)))
        for f in filenames:
            path = os.path.join(dirpath, f)
            assert stat.S_ISREG(os.lstat(path).st_mode), path
            files[os.path.normpath(os.path.join(rel_dir, f))] = Path(path).read_bytes()
    return files, dirs


def assert_same_tree(src: Path, dest: Path, returned: list[str], extra_dirs: tuple[str, ...] = ()) -> None:
    """dest holds exactly src's files (byte for byte) and directories; modes are private."""
    src_files, src_dirs = tree_of(src)
    dest_files, dest_dirs = tree_of(dest)
    assert sorted(dest_files) == sorted(src_files)
    for rel, data in src_files.items():
        assert dest_files[rel] == data, rel
    assert dest_dirs - set(extra_dirs) == src_dirs
    assert sorted(returned) == sorted(src_files)
    for rel in dest_files:
        assert stat.S_IMODE(os.lstat(dest / rel).st_mode) == 0o600, rel
    for rel in dest_dirs:
        assert stat.S_IMODE(os.lstat(dest / rel).st_mode) == 0o700, rel


def genisoimage(src: Path, out: Path, *options: str, label: str = "cidata") -> Path:
    run("genisoimage", "-quiet", "-input-charset", "utf-8", "-V", label, *options, "-o", str(out), str(src))
    return out


def xorriso_iso(src: Path, out: Path, *options: str, label: str = "config-2") -> Path:
    run("xorriso", "-as", "mkisofs", "-quiet", "-V", label, *options, "-o", str(out), str(src))
    return out


def vfat_image(src: Path, out: Path, size_mb: float, *mkfs_options: str, label: str = "cidata") -> Path:
    """A FAT image of ``size_mb`` with ``src``'s tree copied in by mtools (directories with mmd)."""
    run("mkfs.vfat", "-C", "-n", label, *mkfs_options, str(out), str(int(size_mb * 1024)))
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        for d in sorted(dirnames):
            run("mmd", "-i", str(out), "::/" + os.path.normpath(os.path.join(rel, d)), env=MTOOLS_ENV)
        for f in sorted(filenames):
            run("mcopy", "-i", str(out), os.path.join(dirpath, f),
                "::/" + os.path.normpath(os.path.join(rel, f)), env=MTOOLS_ENV)
    return out


def listing(root: Path) -> list[str]:
    """Every path under ``root`` (to check nothing appeared anywhere unexpected)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        out.extend(os.path.relpath(os.path.join(dirpath, n), root) for n in dirnames + filenames)
    return sorted(out)
