"""Fixtures for the drop-in tests: the Debian package built once per session, cloud-init's .deb, the chroot.

``debian_root`` is the module tests' fixture (a private overlay over the cached bookworm tree),
loaded from tests/agent/modules/conftest.py (and the tree it lays over from tests/agent/conftest.py)
under other names so the directories share them.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("CLOUDSEED_CACHE") or os.path.expanduser("~/.cache/cloudseed")
DEBIAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

def _conftest(name: str, *where: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(PROJECT, "tests", "agent", *where, "conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_debian_base = _conftest("cloudseed_agent_conftest")._debian_base  # the agent tests' shared tree
debian_root = _conftest("cloudseed_modules_conftest", "modules").debian_root


@pytest.fixture(scope="session")
def deb_package(tmp_path_factory) -> str:
    """``dpkg-buildpackage -us -uc -b`` run on a copy of the tree: the path of cloudseed_*.deb."""
    from tests.compat import deb_build

    if not deb_build.can_build():
        pytest.skip("needs dpkg-dev, debhelper, dh-python, pybuild-plugin-pyproject (scripts/setup.sh)")
    return deb_build.build_deb(str(tmp_path_factory.mktemp("deb")))


@pytest.fixture(scope="session")
def cloud_init_deb() -> str:
    """Debian's cloud-init .deb, fetched with ``apt-get download`` into the cache (as tests/reference.py)."""
    target = os.path.join(CACHE, "debs")
    found = glob.glob(os.path.join(target, "cloud-init_*_all.deb"))
    if found:
        return found[0]
    os.makedirs(target, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        os.chmod(tmp, 0o755)  # apt's sandbox user writes here
        subprocess.run(["apt-get", "download", "cloud-init"], cwd=tmp, capture_output=True, text=True)
        debs = glob.glob(os.path.join(tmp, "cloud-init_*_all.deb"))
        if not debs:
            pytest.skip("cannot fetch Debian's cloud-init (apt-get download cloud-init)")
        shutil.move(debs[0], target)
    return glob.glob(os.path.join(target, "cloud-init_*_all.deb"))[0]
