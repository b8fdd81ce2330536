"""``bench/boot_compare.py`` reading saved series: the kept older ones (no ``sshd_started_at``) and new ones.

The script is run as the docs say (its own process, ``--tables-from`` and ``--merge``) on the raw
series kept under ``bench/results``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench", "boot_compare.py")
SERIES_X = os.path.join(ROOT, "bench", "results", "boot_compare-2026-11-28-X.json")
SERIES_X_BEFORE = os.path.join(ROOT, "bench", "results", "boot_compare-2026-11-28-X-before.json")


def bench(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc


def with_sshd_started(path: str, out: str, lag: float) -> None:
    """A copy of a kept series as the new benchmark writes it: each boot's sshd line ``lag`` s before SSH."""
    with open(path) as handle:
        saved = json.load(handle)
    for series in (saved["samples"], saved["reboots"]):
        for runs in series.values():
            for sample in runs:
                ssh = sample["ssh_ready_at"]
                sample["sshd_started_at"] = None if ssh is None else round(ssh - lag, 3)
    with open(out, "w") as handle:
        json.dump(saved, handle)


def test_a_series_saved_before_sshd_started_was_read_still_loads(tmp_path):
    shown = bench("--tables-from", SERIES_X).stdout
    header = next(line for line in shown.splitlines() if line.startswith("| agent | sysinit.target"))
    assert "| SSH ready | sshd started |" in header
    assert "SSH ready (host probe) - sshd started" not in shown  # nothing to pair
    merged = str(tmp_path / "merged.json")
    bench("--merge", SERIES_X_BEFORE, SERIES_X, "--json", merged)
    with open(merged) as handle:
        saved = json.load(handle)
    assert saved["rounds"] == 18
    assert saved["differences"]["reboot"]["cloudseed"]["sshd_started_at"] is None
    assert saved["differences"]["reboot"]["cloudseed"]["ssh_ready_at"]["n"] == 18


def test_sshd_started_is_a_column_a_paired_difference_and_a_lag(tmp_path):
    newer = str(tmp_path / "newer.json")
    with_sshd_started(SERIES_X_BEFORE, newer, lag=0.3)
    shown = bench("--tables-from", newer).stdout
    assert "none, reboot: SSH ready (host probe) - sshd started (console line), median +0.30" in shown
    assert "| cloudseed | sshd started | 2 |" in shown  # a paired difference against no agent
    merged = str(tmp_path / "merged.json")
    bench("--merge", SERIES_X, newer, "--json", merged)  # an older part and a newer one
    with open(merged) as handle:
        saved = json.load(handle)
    mine = saved["differences"]["reboot"]["cloudseed"]
    assert mine["sshd_started_at"]["n"] == 2 and mine["ssh_ready_at"]["n"] == 18
    assert mine["sshd_started_at"]["values"] == pytest.approx(mine["ssh_ready_at"]["values"][-2:], abs=0.002)
