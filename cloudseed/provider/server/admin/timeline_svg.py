"""A boot drawn as bars on a time axis, as inline SVG: one drawing for every page that shows one.

``bars_from_reports(reports)`` pairs an instance's provisioning reports (cloud-init's start/finish
events, ``registry/provisioning.py``) into ``Bar``s: each stage (``init-local`` ...) and, under it,
each module or step (``modules-final/config-scripts_user``), in seconds after the boot's first
report; one started and not finished yet runs to the latest report (``running``). ``render(bars)``
draws them: one row each, coloured by result, the label and the detail (the finish event's
description) in a ``<title>`` shown on hover. Every string comes from the instance and is escaped
here. The lab (a layer above) may draw its boots with it too: ``Bar`` needs only a label, start,
end, status and depth.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Iterable

ROW = 18
LABEL_WIDTH = 260
PLOT_WIDTH = 620
COLOURS = {"ok": "#2e8540", "warn": "#d98a00", "fail": "#c62828", "running": "#1f6fbf"}
RESULT_STATUS = {"SUCCESS": "ok", "WARN": "warn", "FAIL": "fail"}


@dataclass
class Bar:
    label: str
    start: float
    end: float
    status: str = "ok"  # ok, warn, fail, running
    detail: str = ""
    depth: int = 0  # 0: a stage, 1: a step inside it

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


def bars_from_reports(reports: Iterable[dict[str, Any]]) -> list[Bar]:
    """Bars for one boot's reports (oldest first), in the order their steps started."""
    reports = list(reports)
    if not reports:
        return []
    origin = min(r["timestamp"] for r in reports)
    latest = max(r["timestamp"] for r in reports)
    open_bars: dict[str, Bar] = {}
    bars: list[Bar] = []
    for report in reports:
        name = report["name"]
        at = report["timestamp"] - origin
        if report["event_type"] == "start":
            bar = Bar(name.split("/", 1)[-1] if "/" in name else name, at, latest - origin, "running",
                      report.get("description", ""), name.count("/"))
            open_bars[name] = bar
            bars.append(bar)
            continue
        bar = open_bars.pop(name, None)
        if bar is None:  # a finish whose start was not reported (or was pruned): from its duration
            duration = float(report.get("duration") or 0.0)
            bar = Bar(name.split("/", 1)[-1] if "/" in name else name, max(0.0, at - duration), at, "ok", "",
                      name.count("/"))
            bars.append(bar)
        bar.end = max(bar.start, at)
        bar.status = RESULT_STATUS.get(report.get("result", "SUCCESS"), "ok")
        bar.detail = report.get("description", "") or bar.detail
    return bars


def _ticks(span: float) -> list[float]:
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600):
        if span / step <= 10:
            return [i * step for i in range(int(span / step) + 1)]
    return [0.0, span]


def render(bars: list[Bar], title: str = "provisioning timeline", span: float | None = None) -> str:
    """The bars as one ``<svg>`` element (empty axis when there are none); ``span``: the seconds the
    axis covers (default: to the last bar's end; the lab gives two boots the same)."""
    span = max([b.end for b in bars] + [1.0]) if span is None else span
    scale = PLOT_WIDTH / span
    height = ROW * (len(bars) + 1) + 8
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" role="img" '
             f'width="{LABEL_WIDTH + PLOT_WIDTH + 20}" height="{height}" aria-label="{escape(title)}">']
    for tick in _ticks(span):
        x = LABEL_WIDTH + tick * scale
        parts.append(f'<line class="axis" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 14}"/>'
                     f'<text class="tick" x="{x:.1f}" y="{height - 2}">{tick:g}s</text>')
    for i, bar in enumerate(bars):
        y = i * ROW + 2
        x = LABEL_WIDTH + bar.start * scale
        width = max(2.0, bar.seconds * scale)
        indent = 8 + 14 * bar.depth
        hover = f"{bar.label}: {bar.status}, {bar.seconds:.3f}s" + (f" — {bar.detail}" if bar.detail else "")
        parts.append(
            f'<g class="bar {escape(bar.status)} depth{bar.depth}" data-name="{escape(bar.label)}" '
            f'data-status="{escape(bar.status)}"><title>{escape(hover)}</title>'
            f'<text x="{indent}" y="{y + 12}">{escape(bar.label[:40])}</text>'
            f'<rect x="{x:.1f}" y="{y + 2}" width="{width:.1f}" height="{ROW - 5}" '
            f'fill="{COLOURS.get(bar.status, "#777")}"/></g>')
    parts.append("</svg>")
    return "".join(parts)
