"""Fixtures shared by the agent's test directories: the real Debian tree, unpacked once per session.

``debian_root`` (tests/agent/modules/conftest.py) and the fault suite (tests/agent/faults/) lay
their private writable roots over it.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest


@pytest.fixture(scope="session")
def _debian_base():
    """The cached debootstrapped tree, unpacked once per test session (read-only below overlays)."""
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        pytest.skip("needs root and debootstrap")
    from tests.agent.identity import debian_chroot

    base = tempfile.mkdtemp(prefix="cloudseed-module-base-")
    try:
        yield debian_chroot.unpack(os.path.join(base, "root"))
    finally:
        shutil.rmtree(base, ignore_errors=True)
