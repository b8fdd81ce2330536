"""``lab --compare``: the same user-data and metadata with cloudseed and with Debian's cloud-init.

Each agent boots its own lab image (the same Debian tree; Debian's cloud-init installed with apt
in one; in the other cloudseed, with Debian cloud-init's /etc/cloud kept as switching agents
leaves it, so both read the same configuration) with the same seed or metadata record; once it is done the guest
helper collects the system state (``labstate.collect``), and ``state_diff`` prints what differs,
with each agent's time. Full boots by default; with ``snapshots`` each agent's run is a try from
its own snapshot (``tries.py``), much faster when comparing many documents.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from cloudseed.lab.boots.delivery import Delivery
from cloudseed.lab.boots.session import BootResult, run_boot
from cloudseed.lab.reports.checks import Check, Expectations, judge, queries
from cloudseed.lab.reports.state_diff import Difference, diff

# cloudseed on the image as switching leaves it (Debian cloud-init's /etc/cloud kept): both agents read
# the same configuration (lab/images/image.py)
AGENTS = (("switched", "cloudseed"), ("reference", "cloud-init"))


@dataclass
class Run:
    name: str  # cloudseed, cloud-init
    result: BootResult
    state: Optional[dict[str, Any]] = None
    checks: Optional[list[Check]] = None
    error: Optional[str] = None
    seconds: float = 0.0  # the whole boot or try, as the host saw it


@dataclass
class Comparison:
    runs: list[Run] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)

    @property
    def names(self) -> tuple[str, str]:
        return self.runs[0].name, self.runs[1].name


def _inspect(expect: Optional[Expectations]) -> Callable[[Any], dict[str, Any]]:
    def inspect(channel) -> dict[str, Any]:
        out = {"state": channel.request("state", wait=600)["state"]}
        if expect is not None:
            out["facts"] = channel.request("facts", queries=queries(expect), wait=300)["facts"]
        return out
    return inspect


def _full_boot(agent: str, name: str, delivery: Delivery, accel: str, reason: str, workdir: str, timeout: float,
               expect: Optional[Expectations], progress) -> Run:
    import time

    from cloudseed.lab.images.image import lab_image

    image = lab_image(agent)
    started = time.monotonic()
    seeds, server = delivery.prepare(workdir)
    with server as running:
        result = run_boot(image, workdir, accel=accel, accel_reason=reason, seeds=seeds,
                          metadata_port=running.port if running else None, platform=delivery.platform,
                          timeout=timeout, progress=progress, inspect=_inspect(expect))
        if running:
            result.metadata_requests = running.request_count()
    run = Run(name, result, seconds=time.monotonic() - started)
    inspected = result.inspected or {}
    if result.timed_out:
        run.error = f"the agent did not finish within {timeout:.0f}s"
    elif "error" in inspected:
        run.error = inspected["error"]
    else:
        run.state = inspected.get("state")
        if expect is not None:
            run.checks = judge(expect, inspected.get("facts") or [], result.status, result.result, result.agent_log)
    if os.path.exists(result.overlay):
        os.unlink(result.overlay)
    return run


def _try(agent: str, name: str, delivery: Delivery, accel: str, reason: str, workdir: str, timeout: float,
         expect: Optional[Expectations], progress, say) -> Run:
    from cloudseed.lab.boots.tries import TrySession
    from cloudseed.lab.images.image import lab_image

    session = TrySession(lab_image(agent), delivery, accel, reason, workdir, timeout=timeout, expect=expect,
                         progress=progress, say=say)
    session.prepare()
    outcome = session.run_try(1, workdir=os.path.join(workdir, "try"), collect_state=True)
    return Run(name, outcome.result, outcome.state, outcome.checks, outcome.error, outcome.seconds)


def run(delivery: Delivery, accel: str, reason: str, workdir: str, timeout: float = 600,
        expect: Optional[Expectations] = None, snapshots: bool = False,
        progress: Optional[Callable] = None, say: Callable[[str], None] = lambda text: None) -> Comparison:
    comparison = Comparison()
    for agent, name in AGENTS:
        say(f"booting {name}")
        where = os.path.join(workdir, name)
        if snapshots:
            comparison.runs.append(_try(agent, name, delivery, accel, reason, where, timeout, expect, progress, say))
        else:
            comparison.runs.append(_full_boot(agent, name, delivery, accel, reason, where, timeout, expect, progress))
    ours, theirs = comparison.runs
    for each in comparison.runs:  # kept for a closer look
        if each.state is not None:
            with open(os.path.join(workdir, f"state-{each.name}.json"), "w") as handle:
                json.dump(each.state, handle, indent=1, sort_keys=True)
    if ours.state is not None and theirs.state is not None:
        comparison.differences = diff(ours.state, theirs.state, comparison.names)
    return comparison


def agent_times(comparison: Comparison) -> str:
    """Each agent's verdict and time, one line each."""
    from cloudseed.lab.reports.agent_report import summarize

    lines = []
    for run in comparison.runs:
        result = run.result
        own = summarize(result.status, result.result, result.agent_log)
        agent = f"{result.agent_seconds:.1f}s" if result.agent_seconds is not None else "-"
        finished = f"{result.agent_done_at:.1f}s" if result.agent_done_at is not None else "-"
        origin = "after the try started" if result.released_at is not None else "after power-on"
        errors = f", {len(own['errors'])} error(s)" if own["errors"] else ""
        lines.append(f"{run.name:<11} {own['status'] or '-'}{errors}; agent time {agent}, finished {finished} {origin}"
                     + (f"; {run.error}" if run.error else ""))
    return "\n".join(lines)
