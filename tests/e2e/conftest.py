"""End-to-end boots: which run, and the shared image, accelerator and SSH key.

``CLOUDSEED_E2E`` unset or ``ci``: the default set (tests not marked ``e2e_extra``);
``all``: every boot; ``0``: none. The lab image is built once and cached between runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

MODE = os.environ.get("CLOUDSEED_E2E", "ci").strip().lower() or "ci"


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e_extra: an end-to-end boot outside the default (ci) set")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/e2e" not in str(item.fspath):
            continue
        item.add_marker(pytest.mark.e2e)
        if MODE in ("0", "no", "none", "off"):
            item.add_marker(pytest.mark.skip(reason="CLOUDSEED_E2E=0"))
        elif MODE != "all" and item.get_closest_marker("e2e_extra"):
            item.add_marker(pytest.mark.skip(reason="not in the default e2e set; CLOUDSEED_E2E=all runs it"))


@pytest.fixture(scope="session")
def lab():
    """(image, accel, reason) for the cloudseed lab image; skips when the host cannot boot VMs."""
    for tool in ("qemu-system-x86_64", "qemu-img", "debootstrap", "mke2fs", "debugfs", "socat"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (scripts/setup.sh)")
    if os.geteuid() != 0:
        pytest.skip("building the lab image needs root (debootstrap, chroot)")
    from cloudseed.lab.images.image import lab_image
    from cloudseed.lab.machine.accel import choose_accel

    image = lab_image("cloudseed")
    accel, reason = choose_accel(os.environ.get("CLOUDSEED_LAB_ACCEL", "auto"), image.kernel, image.initrd)
    return image, accel, reason


@pytest.fixture(scope="session")
def ssh_key(tmp_path_factory):
    directory = tmp_path_factory.mktemp("sshkey")
    key = directory / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "e2e@lab", "-f", str(key)], check=True)
    return str(key), (directory / "id_ed25519.pub").read_text().strip()
