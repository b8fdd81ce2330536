"""``lab --repeat [N]`` and ``lab --watch``: try a cloud-config again and again, seconds apart.

The snapshot is made (or found) once; each try restores it with the files as they are now and
prints the report, the timeline and the checks. ``--repeat`` waits for Enter between tries (``q``
or end of input stops), ``--repeat N`` runs N tries, ``--watch`` starts a try whenever one of
the given files is saved (Ctrl-C stops). The exit code is the last try's.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Callable, Optional

from cloudseed.lab.boots.tries import Try, TrySession
from cloudseed.lab.machine.vm import LabError
from cloudseed.lab.reports.checks import summary
from cloudseed.lab.reports.report import format_report, report_dict
from cloudseed.lab.reports.timeline import build, render_text
from cloudseed.provider.seeds.errors import SeedError


def _stamp(paths: list[str]) -> tuple:
    stamps = []
    for path in paths:
        try:
            info = os.stat(path)
            stamps.append((path, info.st_mtime_ns, info.st_size))
        except OSError:
            stamps.append((path, None, None))
    return tuple(stamps)


def verdict(outcome: Try) -> int:
    """0: the agent finished and every check held; 1 otherwise."""
    if outcome.error or outcome.result.timed_out:
        return 1
    return 1 if outcome.checks and any(not c.ok for c in outcome.checks) else 0


def describe(outcome: Try, as_json: bool = False) -> str:
    """The report of one try: the boot report, its timeline, its checks and how long it took."""
    result = outcome.result
    took = (f"try {outcome.number}: {outcome.seconds:.1f}s from reading the files to the report "
            f"(VM restored and released after {outcome.restored_in:.1f}s, agent done after "
            f"{outcome.timings.get('agent', 0):.1f}s)")
    network = network_line(outcome)
    if as_json:
        data = report_dict(result)
        data.update({"try": outcome.number, "seconds": round(outcome.seconds, 3),
                     "restored_in": round(outcome.restored_in, 3),
                     "timings": {k: round(v, 3) for k, v in outcome.timings.items()}, "error": outcome.error,
                     "network": outcome.network,
                     "checks": [vars(c) for c in outcome.checks] if outcome.checks is not None else None})
        return json.dumps(data, default=str)
    parts = [format_report(result), "", render_text([build(result, result.image.agent)])]
    if outcome.error:
        parts += ["", f"error: {outcome.error}"]
    if outcome.checks is not None:
        parts += ["", summary(outcome.checks)]
    parts += ["", took] + ([network] if network else [])
    return "\n".join(parts)


def network_line(outcome: Try) -> str:
    """What the try did with the network the snapshot had up ("" when it had none)."""
    network = outcome.network or {}
    said = []
    if network.get("kept"):
        said.append(f"{', '.join(network['kept'])} kept up from the snapshot (the configuration is the one it was "
                    f"raised with: no DHCP in this try"
                    + ("; nothing left for networking.service's ifup -a, left out" if network.get("ifup") is False
                       else "") + ")")
    if network.get("restarted"):
        said.append(f"{', '.join(network['restarted'])} reconfigured (the configuration differs from the "
                    f"snapshot's: taken down, raised again by networking.service as on a real boot)")
    if network.get("removed"):
        said.append(f"{', '.join(network['removed'])} taken down (the configuration no longer defines it: down, "
                    f"as on a real boot)")
    return "network: " + "; ".join(said) if said else ""


def run(session: TrySession, count: Optional[int], watch: bool, watched: list[str],
        after_try: Callable[[Try], None], as_json: bool = False, poll: float = 0.2) -> int:
    session.prepare()
    number, code = 0, 0
    stamps = _stamp(watched)
    while True:
        number += 1
        try:
            outcome = session.run_try(number)
        except (SeedError, LabError) as error:  # a file that cannot be read now may be saved again
            if count is not None or not (watch or sys.stdin.isatty()):
                raise
            print(f"try {number}: not run: {error}", file=sys.stderr, flush=True)
            code = 2
        else:
            code = verdict(outcome)
            print(describe(outcome, as_json), flush=True)
            after_try(outcome)
        if count is not None:
            if number >= count:
                return code
            continue
        if watch:
            print(f"\nwatching {', '.join(watched)}: save to try again (Ctrl-C stops)", file=sys.stderr, flush=True)
            try:
                while _stamp(watched) == stamps:
                    time.sleep(poll)
            except KeyboardInterrupt:
                return code
            stamps = _stamp(watched)
            continue
        print("\npress Enter to try again with the files as they are now, q to stop: ", end="", file=sys.stderr,
              flush=True)
        line = sys.stdin.readline()
        if not line or line.strip().lower() in ("q", "quit", "exit"):
            return code
