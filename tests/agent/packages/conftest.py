"""Package-repository tests: ``repo.py`` (the signed loopback apt repository harness) importable,
and the fixtures that build one (``apt_repo``) and a private debootstrapped root (``debian_root``)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "identity"))  # debian_chroot: the cached tree


def _needs_tools() -> None:
    missing = [tool for tool in ("dpkg-deb", "apt-ftparchive", "gpg") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (scripts/setup.sh installs them)")


@pytest.fixture
def apt_repo(tmp_path):
    """An empty signed repository (``repo.Repository``) in a temporary directory."""
    _needs_tools()
    import repo

    repository = repo.Repository(str(tmp_path / "repo"))
    try:
        yield repository
    finally:
        repository.close()


@pytest.fixture
def debian_root(tmp_path):
    """A private, fresh copy of the cached debootstrapped Debian bookworm tree (built when missing)."""
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        pytest.skip("needs root and debootstrap")
    import debian_chroot

    from cloudseed.core.root import TargetRoot

    base = tempfile.mkdtemp(prefix="cloudseed-packages-root-")
    try:
        yield TargetRoot(debian_chroot.unpack(os.path.join(base, "root")))
    finally:
        shutil.rmtree(base, ignore_errors=True)
