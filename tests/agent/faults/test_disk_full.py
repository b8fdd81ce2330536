"""A full disk: the boot fails visibly (status error with the reason, ``status --wait`` returns 1), and the
boot after the disk is freed converges to what a clean boot gives (an append made once).

The root's writable layer is a small tmpfs filled to leave 0 to 128 KiB (more levels with
``CLOUDSEED_FAULTS=all``); ``/run`` is on it too, so the status itself may not fit.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.agent.faults import fault_support as fs
from tests.agent.faults.fault_support import EXTENDED, fill

KIB = 1024
# 224 KiB: useradd cut short in the home, userdel unable to lock /etc/passwd (a user left half made)
EXTRA = [4 * KIB, 32 * KIB, 96 * KIB, 224 * KIB, 256 * KIB, 512 * KIB]
LEVELS = [0, 16 * KIB, 64 * KIB, 128 * KIB] + (EXTRA if EXTENDED else [])


@pytest.mark.parametrize("free", LEVELS, ids=[f"{n // KIB}KiB-free" for n in LEVELS])
def test_a_full_disk_fails_the_boot_visibly_and_the_next_boot_converges(small_disk_root, clean_boot, free):
    root, clear = small_disk_root(free)
    proc = fs.agent(root, "boot")
    assert "Traceback" not in proc.stderr, proc.stderr
    shown = fs.status(root, "--long")
    assert "Traceback" not in shown.stderr, shown.stderr
    if proc.returncode == 0:  # everything fitted (only possible at the larger levels)
        assert free >= 256 * KIB and shown.returncode == 0, shown.stdout
    else:
        assert shown.returncode == 1 and "status: error" in shown.stdout, shown.stdout
        assert "No space left on device" in shown.stdout, shown.stdout
        waited = fs.status(root, "--wait", timeout=20)      # the wait ends, with the error
        assert waited.returncode == 1, waited.stdout

    clear()
    assert fs.boot(root).returncode == 0
    after = fs.status(root)
    assert after.returncode == 0 and "status: done" in after.stdout, after.stdout
    assert fs.fingerprint(root) == clean_boot["fingerprint"]
    assert root.read_text("/etc/fault/appended.log") == "appended once\n"
    assert len(fs.runs(root, fs.RUNCMD_LOG)) in (1, 2)       # twice only when the full boot got that far
    assert fs.leftover_temporaries(root) == []


def test_a_full_state_disk_costs_the_records_not_the_users_keys(fault_root, clean_boot):
    """Only /var/lib/cloudseed is full (its own small file system): users, keys, files are still set up."""
    state = fault_root.path("/var/lib/cloudseed")
    os.makedirs(state, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", state], check=True)
    try:
        filler = os.path.join(state, "filler")
        fill(filler, 0)
        fs.new_boot(fault_root)
        proc = fs.agent(fault_root, "boot")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        shown = fs.status(fault_root, "--long")
        assert shown.returncode == 1, shown.stdout
        assert "No space left on device: '/var/lib/cloudseed/" in shown.stdout, shown.stdout
        now = fs.fingerprint(fault_root)
        for key in ("passwd", "authorized_keys", "sudoers", "hostname", "app.conf", "appended.log", "timezone",
                    "deferred"):
            assert now[key] == clean_boot["fingerprint"][key], key

        os.unlink(filler)                                    # the administrator frees the disk
        assert fs.boot(fault_root).returncode == 0
        assert fs.status(fault_root).returncode == 0
        assert fs.fingerprint(fault_root) == clean_boot["fingerprint"]
        assert fault_root.read_text("/etc/fault/appended.log") == "appended once\n"
    finally:
        subprocess.run(["umount", "-l", state], check=False)
