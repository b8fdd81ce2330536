"""The lab's report of one boot: timeline, stages, each module's result, errors, key figures.

``format_report`` renders it for people; ``report_dict`` gives the same as JSON-able data.
Stage times come from the agent's console markers where it prints them, else from its status
records; module results from its status (cloudseed) or its log read back from the guest disk
(cloud-init), through ``agent_report.summarize``, so both agents report the same way.
"""

from __future__ import annotations

from typing import Any

from cloudseed.lab.boots.session import BootResult
from cloudseed.lab.reports.agent_report import STAGE_ORDER, summarize


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"


NO_CONFIG = "no configuration for it"


def report_dict(result: BootResult) -> dict[str, Any]:
    agent = summarize(result.status, result.result, result.agent_log)
    stages: dict[str, dict[str, Any]] = {}
    for name in [*STAGE_ORDER, *result.stages, *agent["stages"]]:
        if name in stages or (name not in result.stages and name not in agent["stages"]):
            continue
        timing = result.stages.get(name)
        own = agent["stages"].get(name) or {}
        modules = own.get("modules") or []
        stages[name] = {
            "started_at": timing.started_at if timing else None,
            "finished_at": timing.finished_at if timing else None,
            "seconds": timing.seconds if timing and timing.seconds is not None else own.get("seconds"),
            "modules": timing.modules if timing and timing.modules else
            len([m for m in modules if m.get("status") != "skipped"]),
            "errors": timing.errors if timing and timing.errors else
            len([m for m in modules if m.get("status") == "failed"]),
        }
    return {
        "accel": result.accel, "accel_reason": result.accel_reason,
        "image": result.image.disk, "agent": result.image.agent,
        "timed_out": result.timed_out,
        "kernel_at": result.kernel_at, "agent_done_at": result.agent_done_at,
        "ssh_ready_at": result.ssh_ready_at, "agent_seconds": result.agent_seconds,
        "stages": stages,
        "datasource": agent["datasource"], "status": agent["status"],
        "errors": agent["errors"], "warnings": agent["warnings"],
        "modules": {name: own["modules"] for name, own in agent["stages"].items() if own.get("modules")},  # in order
        "metadata_requests": result.metadata_requests,
        "console_log": result.console_log,
    }


def format_report(result: BootResult) -> str:
    data = report_dict(result)
    lines = [f"accelerator: {result.accel} ({result.accel_reason})",
             f"image: {result.image.disk} [{result.image.agent}]"]
    if result.timed_out:
        lines.append("TIMED OUT waiting for the agent to finish; see " + result.console_log)
    lines.append(f"datasource: {data['datasource'] or '-'}    status: {data['status'] or '-'}")
    lines.append("")
    lines.append(f"{'stage':<10} {'started':>9} {'finished':>9} {'agent time':>11} {'modules':>8} {'errors':>7}")
    for name, stage in data["stages"].items():
        lines.append(f"{name:<10} {_fmt(stage['started_at']):>9} {_fmt(stage['finished_at']):>9} "
                     f"{_fmt(stage['seconds']):>11} {stage['modules']:>8} {stage['errors']:>7}")
    shown, unconfigured = [], 0
    for stage, entries in data["modules"].items():
        for entry in entries:
            if entry.get("status") == "skipped" and entry.get("reason") == NO_CONFIG:
                unconfigured += 1
                continue
            detail = entry.get("reason") or entry.get("error") or ""
            seconds = entry.get("seconds")
            took = f"{seconds:.2f}s" if isinstance(seconds, (int, float)) else ""
            shown.append(f"  {stage:<8} {entry.get('name', '?'):<26} {entry.get('status', '?'):<8} "
                         f"{took:>7}  {detail}".rstrip())
    if shown or unconfigured:
        lines.append("")
        lines.append("modules:")
        lines.extend(shown)
        if unconfigured:
            lines.append(f"  ({unconfigured} more skipped: {NO_CONFIG})")
    elif result.status is None and not result.timed_out:
        lines.append("")
        lines.append("modules: - (the agent's status was not collected; see the console log)")
    for title in ("errors", "warnings"):
        if data[title]:
            lines.append("")
            lines.append(f"{title}:")
            for item in data[title]:
                lines.append(f"  - {item if isinstance(item, str) else item!r}")
    lines.append("")
    lines.append(f"kernel started:     {_fmt(result.kernel_at)}")
    lines.append(f"agent finished:     {_fmt(result.agent_done_at)} after power-on")
    lines.append(f"agent time (total): {_fmt(result.agent_seconds)}")
    lines.append(f"SSH ready:          {_fmt(result.ssh_ready_at)} after power-on"
                 + ("" if result.ssh_ready_at is not None else " (not reached)"))
    if result.metadata_requests is not None:
        lines.append(f"metadata requests:  {result.metadata_requests}")
    lines.append(f"console log:        {result.console_log}")
    return "\n".join(lines)
