"""Shared fixtures (a temporary target root with a minimal system layout) and the skip budget."""

from __future__ import annotations

import os

import pytest

from tests import skip_budget


def pytest_configure(config):
    skip_budget.install(config)  # a skip tests/skip_budget.py does not list fails its test


@pytest.fixture
def target(tmp_path):
    """A TargetRoot over an empty directory with /etc/passwd, /etc/group and an os-release."""
    from cloudseed.core.root import TargetRoot

    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n"
                                     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    (root / "etc/group").write_text("root:x:0:\nadm:x:4:\nsudo:x:27:\nnogroup:x:65534:\n")
    (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12"\n')
    return TargetRoot(str(root))


BUSYBOX = "/bin/busybox"
APPLETS = ("sh", "echo", "cat", "touch", "mkdir", "id", "env", "sleep", "true", "false", "printf",
           "ls", "grep", "rm", "test", "[", "date", "tr")


@pytest.fixture
def shell_target(target):
    """``target`` plus a static busybox as /bin/sh and friends, so scripts really run chrooted."""
    import shutil

    if not os.path.exists(BUSYBOX) or os.geteuid() != 0:
        pytest.skip("needs root and busybox-static (/bin/busybox) to run scripts in a chroot")
    top = target.top
    os.makedirs(f"{top}/bin", exist_ok=True)
    os.makedirs(f"{top}/usr/bin", exist_ok=True)
    os.makedirs(f"{top}/tmp", exist_ok=True)
    os.makedirs(f"{top}/var/tmp", exist_ok=True)
    shutil.copy2(BUSYBOX, f"{top}/bin/busybox")
    for applet in APPLETS:
        os.symlink("busybox", f"{top}/bin/{applet}")
    return target


@pytest.fixture
def oracle(request):
    """The cloud-init release a differential test compares with: 22.4 unless the test is marked
    ``@pytest.mark.oracle("new")`` (or parametrized indirectly with the oracle's name)."""
    from tests.reference import OLD, oracle_named

    marker = request.node.get_closest_marker("oracle")
    name = getattr(request, "param", None) or (marker.args[0] if marker else None)
    chosen = oracle_named(name) if name else OLD
    chosen.skip_unless_available()
    return chosen
