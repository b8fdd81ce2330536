"""The boot as a timeline: kernel, systemd milestones, each stage and module, SSH ready.

``build(result, name)`` turns one ``BootResult`` (a full boot, or a try restored from a snapshot)
into a ``Lane``: bars (kernel or restore, each agent stage, each module laid out in its stage in
the order it ran, from the durations the agent recorded) and marks (systemd targets reached, SSH
answering, agent finished), in seconds after power-on (a try: after it started). ``render_text``
draws one or more lanes on one time axis for a terminal; ``report_html.py`` draws the same lanes
as SVG.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from cloudseed.lab.boots.session import BootResult
from cloudseed.lab.reports.agent_report import STAGE_ORDER, summarize

MILESTONES = ("sysinit.target", "basic.target", "network.target", "network-online.target", "multi-user.target")
KEY_UNITS = ("networking.service", "systemd-networkd.service", "NetworkManager.service", "ssh.service")
LONG_UNIT = 2.0  # other units drawn when starting them took this long (the agent's own are its stages)...
OTHER_UNITS = 3  # ...the longest few of them
NO_CONFIG = "no configuration for it"


@dataclass
class Bar:
    label: str
    start: float
    end: float
    kind: str  # kernel, restore, unit (a systemd unit starting), stage, module
    detail: str = ""  # shown on hover / in the tables: status, reason
    status: str = "ok"  # ok, failed, skipped
    stage: str = ""  # the stage a module ran in

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class Mark:
    label: str
    at: float
    kind: str  # milestone, ssh, done, released


@dataclass
class Lane:
    name: str  # "cloudseed", "cloud-init 22.4"...
    bars: list[Bar] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    restored: bool = False  # a try: time 0 is when it started, not power-on
    agent_seconds: Optional[float] = None

    @property
    def end(self) -> float:
        ends = [b.end for b in self.bars] + [m.at for m in self.marks]
        return max(ends) if ends else 0.0

    def stages(self) -> list[Bar]:
        return [b for b in self.bars if b.kind == "stage"]

    def modules(self, stage: str) -> list[Bar]:
        return [b for b in self.bars if b.kind == "module" and b.stage == stage]


def _stage_starts(result: BootResult) -> dict[str, float]:
    return {name: t.started_at for name, t in result.stages.items() if t.started_at is not None}


def build(result: BootResult, name: str) -> Lane:
    lane = Lane(name=name, restored=result.released_at is not None, agent_seconds=result.agent_seconds)
    if result.released_at is not None:
        lane.bars.append(Bar("restore", 0.0, result.released_at, "restore", "snapshot loaded, clock and entropy set"))
        lane.marks.append(Mark("released", result.released_at, "released"))
    elif result.kernel_at is not None:
        first_systemd = min([at for _, _, at in result.milestones + result.units] or [result.kernel_at])
        lane.bars.append(Bar("kernel", result.kernel_at, max(first_systemd, result.kernel_at), "kernel",
                             "kernel and initramfs, to systemd's first unit"))
    units = {}
    for unit, _, at in result.units:
        start = result.unit_starts.get(unit)
        if start is not None and unit not in units and not unit.startswith(("cloudseed", "cloud-", "cloud-init")):
            units[unit] = (start, at)
    others = sorted((u for u in units if u not in KEY_UNITS and units[u][1] - units[u][0] >= LONG_UNIT),
                    key=lambda u: units[u][0] - units[u][1])[:OTHER_UNITS]
    for unit in sorted((u for u in units if u in KEY_UNITS or u in others), key=lambda u: units[u][0]):
        lane.bars.append(Bar(unit, *units[unit], "unit", "systemd: starting to started"))
    agent = summarize(result.status, result.result, result.agent_log)
    starts = _stage_starts(result)
    names = [s for s in STAGE_ORDER if s in starts or s in agent["stages"]]
    for index, stage in enumerate(names):
        timing = result.stages.get(stage)
        own = agent["stages"].get(stage) or {}
        start = starts.get(stage)
        seconds = timing.seconds if timing and timing.seconds is not None else own.get("seconds")
        end = timing.finished_at if timing and timing.finished_at is not None else None
        if start is None and end is not None and seconds is not None:
            start = end - seconds
        if start is None:
            continue
        if end is None:
            following = [starts[n] for n in names[index + 1:] if n in starts]
            end = start + seconds if seconds is not None else (following[0] if following else
                                                                result.agent_done_at or start)
        modules = [m for m in own.get("modules") or [] if not (m.get("status") == "skipped" and
                                                                 m.get("reason") == NO_CONFIG)]
        failed = sum(1 for m in modules if m.get("status") == "failed")
        lane.bars.append(Bar(stage, start, end, "stage", f"{len(modules)} modules, {failed} failed",
                             "failed" if failed else "ok"))
        at = start
        for module in modules:
            took = module.get("seconds") if isinstance(module.get("seconds"), (int, float)) else 0.0
            note = str(module.get("reason") or module.get("error") or "")
            lane.bars.append(Bar(str(module.get("name", "?")), at, at + took, "module", note,
                                 str(module.get("status", "ok")), stage))
            at += took
    seen = set()
    for unit, _, at in result.milestones:
        if unit in MILESTONES and unit not in seen:
            seen.add(unit)
            lane.marks.append(Mark(unit, at, "milestone"))
    if result.ssh_ready_at is not None:
        lane.marks.append(Mark("SSH ready", result.ssh_ready_at, "ssh"))
    if result.agent_done_at is not None:
        lane.marks.append(Mark("agent finished", result.agent_done_at, "done"))
    lane.marks.sort(key=lambda m: m.at)
    return lane


def _scale(lanes: list[Lane], width: int) -> tuple[float, float]:
    end = max([lane.end for lane in lanes] + [1.0])
    return end, (width - 1) / end


def render_text(lanes: list[Lane], width: int = 60) -> str:
    """The lanes as rows of bars on one axis, for a terminal (plain characters, no colour)."""
    end, per_second = _scale(lanes, width)
    origin = "after the try started" if all(lane.restored for lane in lanes) else "after power-on"
    lines = [f"timeline (seconds {origin}; one column = {end / (width - 1):.2f}s)"]
    ticks = [" "] * width
    labels = [" "] * (width + 8)
    step = max(1, round(end / 6))
    for second in range(0, int(end) + 1, step):
        column = int(second * per_second)
        if column < width:
            ticks[column] = "|"
            for offset, char in enumerate(f"{second}s"):
                if column + offset < len(labels):
                    labels[column + offset] = char
    lines.append(f"{'':<24}{''.join(labels).rstrip()}")
    lines.append(f"{'':<24}{''.join(ticks)}")

    def row(title: str, start: float, stop: float, char: str = "#") -> str:
        cells = [" "] * width
        first, last = int(start * per_second), max(int(start * per_second), int(stop * per_second))
        for column in range(first, min(last, width - 1) + 1):
            cells[column] = char
        return f"{title[:23]:<24}{''.join(cells).rstrip()}  {stop - start:.1f}s"

    for lane in lanes:
        if len(lanes) > 1:
            lines.append(f"[{lane.name}]")
        for bar in lane.bars:
            if bar.kind in ("kernel", "restore"):
                lines.append(row(bar.label, bar.start, bar.end, "="))
            elif bar.kind == "unit":
                lines.append(row(bar.label, bar.start, bar.end, "~"))
            elif bar.kind == "stage":
                lines.append(row(f"{bar.label} stage", bar.start, bar.end))
                slow = sorted((m for m in lane.modules(bar.label) if m.seconds >= 0.2), key=lambda m: -m.seconds)[:3]
                for module in sorted(slow, key=lambda m: m.start):
                    lines.append(row(f"  {module.label}", module.start, module.end, "-"))
        for mark in lane.marks:
            column = min(width - 1, int(mark.at * per_second))
            lines.append(f"{mark.label[:23]:<24}{' ' * column}^ {mark.at:.1f}s")
    return "\n".join(lines)
