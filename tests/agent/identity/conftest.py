"""Fixtures for the identity tests: temporary Debian/RHEL roots, a module runner, the real chroot."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))

RHEL_OS_RELEASE = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n'


@dataclass
class InputDatasource:
    """The datasource facts the identity modules read (what a real datasource would have fetched)."""

    local_hostname: str | None = None
    public_keys: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    name: str = "Test"


def run(root, module: str, cfg: dict, datasource=None, instance_data: dict | None = None):
    """Run one module through the real framework; returns (result, context)."""
    from cloudseed.agent.modules import ModuleContext, run_module
    from cloudseed.agent.state import Paths

    ctx = ModuleContext(root=root, paths=Paths(root), cfg=cfg, instance_id="i-test", stage="init",
                        datasource=datasource, instance_data=instance_data if instance_data is not None else {})
    result = run_module(ctx, module, force=True)
    return result, ctx


@pytest.fixture
def rhel_target(target):
    """The ``target`` root made into a Rocky Linux 9 system."""
    with open(target.path("/etc/os-release"), "w") as handle:
        handle.write(RHEL_OS_RELEASE)
    with open(target.path("/etc/group"), "a") as handle:
        handle.write("wheel:x:10:\nssh_keys:x:996:\n")
    return target


@pytest.fixture(params=["debian", "rhel"])
def any_target(request, target):
    if request.param == "rhel":
        return request.getfixturevalue("rhel_target")
    return target


@pytest.fixture(scope="session")
def chroot_tree():
    """A fresh copy of the cached debootstrapped Debian bookworm tree (built when missing)."""
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        pytest.skip("needs root and debootstrap")
    import debian_chroot

    base = tempfile.mkdtemp(prefix="cloudseed-identity-chroot-")
    tree = debian_chroot.unpack(os.path.join(base, "root"))
    os.makedirs(os.path.join(tree, "run/sshd"), exist_ok=True)
    yield tree
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def chroot(chroot_tree):
    from cloudseed.agent.root import TargetRoot

    return TargetRoot(chroot_tree)
