"""``lab --parallel N``: every user-data file of a directory, N VMs at a time, and a summary table.

All runs share one image and one snapshot (``machine/snapshot.py``): each VM is a separate qemu with its
own overlay, seed, user-mode network (its own forwarded ports) and, for metadata datasources, its
own metadata server and registry. ``--expect`` applies to each. The table gives per file: the
agent's status, its time, the checks and the whole try's time.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from cloudseed.lab.boots.tries import Try, TrySession

SKIPPED_NAMES = ("meta-data", "vendor-data", "network-config")


def user_data_files(directory: str) -> list[str]:
    """The regular files of ``directory``, in name order (hidden files and seed companions aside)."""
    names = sorted(n for n in os.listdir(directory) if not n.startswith(".") and n not in SKIPPED_NAMES)
    return [os.path.join(directory, n) for n in names if os.path.isfile(os.path.join(directory, n))]


def run(session: TrySession, files: list[str], jobs: int, done: Callable[[str, Try], None]) -> list[tuple[str, Try]]:
    session.prepare()

    def one(item: tuple[int, str]) -> tuple[str, Try]:
        number, path = item
        name = os.path.basename(path)
        workdir = os.path.join(session.workdir, f"{number:03d}-{name}")
        try:
            outcome = session.run_try(number, session.delivery.with_user_data(path), workdir=workdir)
        except Exception as e:  # noqa: BLE001 - one file's failure is a row of the table, not the end of the run
            from cloudseed.lab.boots.session import BootResult

            result = BootResult(accel=session.accel, accel_reason="", image=session.image, workdir=workdir,
                                console_log="", overlay="")
            outcome = Try(number, result, error=f"{type(e).__name__}: {e}")
        done(name, outcome)
        return name, outcome

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, enumerate(files, 1)))


def table(rows: list[tuple[str, Try]]) -> str:
    from cloudseed.lab.reports.agent_report import summarize

    width = max([len(name) for name, _ in rows] + [4])
    lines = [f"{'file':<{width}}  {'status':<14} {'agent':>7} {'errors':>6} {'checks':>9} {'try':>7}"]
    for name, outcome in rows:
        result = outcome.result
        agent = summarize(result.status, result.result, result.agent_log)
        status = "TIMED OUT" if result.timed_out else ("FAILED" if outcome.error and result.status is None
                                                       else agent["status"] or "-")
        checks = "-"
        if outcome.checks is not None:
            passed = sum(1 for c in outcome.checks if c.ok)
            checks = f"{passed}/{len(outcome.checks)}"
        seconds = f"{result.agent_seconds:.1f}s" if result.agent_seconds is not None else "-"
        lines.append(f"{name:<{width}}  {status:<14} {seconds:>7} {len(agent['errors']):>6} {checks:>9} "
                     f"{outcome.seconds:>6.1f}s" + (f"  {outcome.error}" if outcome.error else ""))
    return "\n".join(lines)
