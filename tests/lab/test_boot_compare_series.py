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


def with_hostname_line(path: str, out: str, kernel_phase: dict[str, float]) -> None:
    """A copy of a kept series as the benchmark now writes it: systemd's hostname line at
    ``kernel_phase[agent]`` s after power-on in every boot (the phase before the agent can act)."""
    with open(path) as handle:
        saved = json.load(handle)
    for series in (saved["samples"], saved["reboots"]):
        for agent, runs in series.items():
            for sample in runs:
                sample["hostname_at"] = kernel_phase[agent]
    with open(out, "w") as handle:
        json.dump(saved, handle)


def test_ssh_and_finished_are_also_paired_from_the_hostname_line(tmp_path):
    # the kernel phase of the image without an agent 1 s longer in every boot: counted from power-on
    # that second flatters cloudseed; counted from systemd's hostname line it does not
    newer = str(tmp_path / "newer.json")
    with_hostname_line(SERIES_X_BEFORE, newer, {"none": 6.0, "cloudseed": 5.0})
    merged = str(tmp_path / "merged.json")
    bench("--merge", newer, "--json", merged)
    with open(merged) as handle:
        mine = json.load(handle)["differences"]["reboot"]["cloudseed"]
    from_power_on = mine["finished_at"]["values"]
    assert mine["finished_after_hostname"]["values"] == pytest.approx([v + 1.0 for v in from_power_on], abs=0.002)
    assert mine["ssh_after_hostname"]["values"] == pytest.approx(
        [v + 1.0 for v in mine["ssh_ready_at"]["values"]], abs=0.002)
    shown = bench("--tables-from", merged).stdout
    assert "| cloudseed | boot finished, from systemd's hostname line | 2 |" in shown


def test_a_series_saved_before_the_hostname_line_has_no_such_difference():
    shown = bench("--tables-from", SERIES_X).stdout
    assert "from systemd's hostname line" not in shown
    assert "| cloudseed | boot finished | 16 |" in shown


def test_the_hostname_line_is_found_in_a_real_console_log():
    import gzip
    import re

    sys.path.insert(0, os.path.join(ROOT, "bench"))  # a script directory, not a package: imported as the script runs
    try:
        from boot_compare import HOSTNAME
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))
    recorded = os.path.join(ROOT, "tests", "lab", "recorded", "boot-cloudseed.console.log.gz")
    with gzip.open(recorded, "rt", errors="replace") as handle:
        hits = [line for line in handle if HOSTNAME.search(line)]
    assert len(hits) == 1 and re.match(r"\[\s*34\.022\]", hits[0])  # the one line, its host-side stamp


def test_a_series_of_one_agent_keeps_its_reboots_when_merged(tmp_path):
    # an interleaved comparison of two agent trees runs one of them without the image with no agent:
    # nothing to pair with, but its reboots are still its reboots
    with open(SERIES_X_BEFORE) as handle:
        saved = json.load(handle)
    for series in (saved["samples"], saved["reboots"]):
        del series["none"]
    saved["differences"] = {"first boot": {}, "reboot": {}}
    alone = str(tmp_path / "alone.json")
    with open(alone, "w") as handle:
        json.dump(saved, handle)
    merged = str(tmp_path / "merged.json")
    bench("--merge", alone, alone, "--json", merged)
    with open(merged) as handle:
        both = json.load(handle)
    assert len(both["reboots"]["cloudseed"]) == 4 and len(both["samples"]["cloudseed"]) == 4
