"""Package-repository tests: the fixtures that build a signed loopback apt repository (``apt_repo``,
from ``repo.py``) and a private debootstrapped root (``debian_root``)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest


def _needs_tools() -> None:
    missing = [tool for tool in ("dpkg-deb", "apt-ftparchive", "gpg") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (scripts/setup.sh installs them)")


@pytest.fixture
def apt_repo(tmp_path):
    """An empty signed repository (``repo.Repository``) in a temporary directory."""
    _needs_tools()
    from tests.agent.packages import repo

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
    from cloudseed.core.root import TargetRoot
    from tests.agent.identity import debian_chroot

    base = tempfile.mkdtemp(prefix="cloudseed-packages-root-")
    try:
        yield TargetRoot(debian_chroot.unpack(os.path.join(base, "root")))
    finally:
        shutil.rmtree(base, ignore_errors=True)
