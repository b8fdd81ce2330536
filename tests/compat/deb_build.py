"""Building cloudseed's Debian package from a copy of the working tree (tests that need the .deb)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEBIAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def can_build() -> bool:
    return bool(shutil.which("dpkg-buildpackage")) and os.path.exists("/usr/share/perl5/Debian/Debhelper")


def build_deb(top: str) -> str:
    """``dpkg-buildpackage -us -uc -b`` on a copy of the tree under ``top``: the path of cloudseed_*.deb."""
    src = os.path.join(top, "src")
    os.makedirs(src)
    for name in ("cloudseed", "packaging"):
        shutil.copytree(os.path.join(PROJECT, name), os.path.join(src, name),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # debian/ without what an earlier build in the tree left
    shutil.copytree(os.path.join(PROJECT, "debian"), os.path.join(src, "debian"),
                    ignore=shutil.ignore_patterns("cloudseed", "files", "*.substvars", "*debhelper*", ".debhelper"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(os.path.join(PROJECT, name), os.path.join(src, name))
    build = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, capture_output=True, text=True,
                           env={**os.environ, "PATH": DEBIAN_PATH})
    if build.returncode != 0:
        raise AssertionError(build.stdout[-3000:] + build.stderr[-3000:])
    debs = glob.glob(os.path.join(top, "cloudseed_*_all.deb"))
    if len(debs) != 1:
        raise AssertionError(f"expected one cloudseed_*_all.deb in {top}: {os.listdir(top)}")
    return debs[0]
