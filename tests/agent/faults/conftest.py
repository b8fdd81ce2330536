"""Fixtures of the fault suite: private Debian roots (overlays over the session's unpacked tree), roots
whose writable layer is a small file system, roots laid over a snapshot of an earlier boot, and the
state a clean boot leaves (what every faulted boot must converge to once the fault is gone).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import pytest

from tests.agent.faults import fault_support as fs


def _needs_tools() -> None:
    for tool in ("setpriv", "mount"):
        if not shutil.which(tool):
            pytest.skip(f"needs {tool}")


@pytest.fixture
def fault_root(_debian_base):
    """A private Debian root with this suite's seed, before its first boot."""
    from cloudseed.core.root import TargetRoot
    from tests.agent.identity import debian_chroot

    _needs_tools()
    with debian_chroot.overlay([_debian_base]) as (merged, _upper):
        root = TargetRoot(merged)
        fs.seed(root)
        yield root


@pytest.fixture(scope="session")
def clean_boot(_debian_base):
    """The fingerprint of a clean first boot, and the layers of that root after its stages.

    ``layers["network"]``: the root after ``init --local`` and ``init`` (the config and final stages
    not run yet); ``layers["boot"]``: after the whole boot. Each is a directory usable as a lower
    layer over the unpacked tree, so a test starts from that point in a few milliseconds.
    ``seconds``: how long that whole boot took (the window the kill tests aim into).
    """
    from cloudseed.core.root import TargetRoot
    from tests.agent.identity import debian_chroot

    _needs_tools()
    keep = tempfile.mkdtemp(prefix="cloudseed-fault-layers-")
    layers, found, seconds = {}, {}, 1.0
    try:
        for name, steps in (("network", (("init", "--local"), ("init",))), ("boot", (("boot",),))):
            layer_dir = os.path.join(keep, name)
            os.makedirs(layer_dir)
            with debian_chroot.overlay([_debian_base], layer_dir=layer_dir) as (merged, upper):
                root = TargetRoot(merged)
                fs.seed(root)
                fs.new_boot(root)
                started = time.monotonic()
                for step in steps:
                    proc = fs.agent(root, *step)
                    assert proc.returncode == 0, proc.stderr
                if name == "boot":
                    found = fs.fingerprint(root)
                    seconds = time.monotonic() - started
            layers[name] = upper  # the root's changes, kept once it is unmounted: a lower layer now
        yield {"fingerprint": found, "layers": layers, "seconds": seconds}
    finally:
        shutil.rmtree(keep, ignore_errors=True)


@pytest.fixture
def root_after(_debian_base, clean_boot):
    """``root_after("network" | "boot")``: a private root laid over that point of the clean boot."""
    import contextlib

    from cloudseed.core.root import TargetRoot
    from tests.agent.identity import debian_chroot

    stack = contextlib.ExitStack()

    def make(point: str):
        merged, _upper = stack.enter_context(debian_chroot.overlay([clean_boot["layers"][point], _debian_base]))
        return TargetRoot(merged)

    with stack:
        yield make


@pytest.fixture
def small_disk_root(_debian_base):
    """``small_disk_root(free)``: a seeded root whose writable layer is a tmpfs with ``free`` bytes left.

    Returns (root, clear): ``clear()`` removes the filler, as an administrator freeing the disk.
    """
    import contextlib

    from cloudseed.core.root import TargetRoot
    from tests.agent.identity import debian_chroot

    _needs_tools()
    stack = contextlib.ExitStack()

    def make(free: int, size: str = "24m"):
        disk = tempfile.mkdtemp(prefix="cloudseed-small-disk-")
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", disk], check=True)
        stack.callback(shutil.rmtree, disk, True)
        stack.callback(subprocess.run, ["umount", "-l", disk], check=False)
        merged, _upper = stack.enter_context(debian_chroot.overlay([_debian_base], layer_dir=disk))
        root = TargetRoot(merged)
        fs.seed(root)
        fs.new_boot(root)
        filler = os.path.join(disk, "filler")
        fs.fill(filler, free)
        return root, lambda: os.unlink(filler)

    with stack:
        yield make
