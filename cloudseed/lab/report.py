"""The lab's report of one boot: timeline, stages, each module's result, errors, key figures.

``format_report`` renders it for people; ``report_dict`` gives the same as JSON-able data.
Module results come from the agent's ``status --format json --long`` as the lab collector
printed it on the console; stage times from the agent's own console markers.
"""

from __future__ import annotations

from typing import Any

from cloudseed.lab.session import BootResult


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"


def _stage_modules(status: Any) -> dict[str, list[dict]]:
    stages = status.get("stages") if isinstance(status, dict) else None
    if not isinstance(stages, dict):
        return {}
    return {name: [m for m in (data.get("modules") or []) if isinstance(m, dict)]
            for name, data in stages.items() if isinstance(data, dict)}


def report_dict(result: BootResult) -> dict[str, Any]:
    status = result.status if isinstance(result.status, dict) else {}
    return {
        "accel": result.accel, "accel_reason": result.accel_reason,
        "image": result.image.disk, "agent": result.image.agent,
        "timed_out": result.timed_out,
        "kernel_at": result.kernel_at, "agent_done_at": result.agent_done_at,
        "ssh_ready_at": result.ssh_ready_at, "agent_seconds": result.agent_seconds,
        "stages": {name: vars(timing) for name, timing in result.stages.items()},
        "datasource": status.get("datasource"), "status": status.get("status"),
        "errors": status.get("errors", []), "warnings": status.get("warnings", []),
        "modules": _stage_modules(status),
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
    for name, timing in result.stages.items():
        lines.append(f"{name:<10} {_fmt(timing.started_at):>9} {_fmt(timing.finished_at):>9} "
                     f"{_fmt(timing.seconds):>11} {timing.modules:>8} {timing.errors:>7}")
    modules = data["modules"]
    if modules:
        lines.append("")
        lines.append("modules:")
        order = list(result.stages) + [name for name in modules if name not in result.stages]
        for stage in order:
            entries = modules.get(stage, [])
            for entry in entries:
                detail = entry.get("reason") or entry.get("error") or ""
                seconds = entry.get("seconds")
                took = f"{seconds:.2f}s" if isinstance(seconds, (int, float)) else ""
                lines.append(f"  {stage:<8} {entry.get('name', '?'):<26} {entry.get('status', '?'):<8} "
                             f"{took:>7}  {detail}".rstrip())
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
