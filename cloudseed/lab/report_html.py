"""``--html FILE``: the lab's report as one self-contained page (inline CSS and SVG, no script).

The timeline (``timeline.py`` lanes: one run, or both agents of ``--compare`` on one time axis)
is drawn as SVG: a row per kernel/restore and per stage, each stage's modules in a row beneath
it, systemd milestones, SSH ready and the agent's end as marks. Below it: the stages and modules
of each run, the checks of ``--expect`` and the differences of ``--compare``. Every element
carries its times as ``data-`` attributes, so what is drawn can be checked against the figures.
"""

from __future__ import annotations

import html
from typing import Any, Optional

from cloudseed.lab.checks import Check
from cloudseed.lab.timeline import Lane

LABEL_WIDTH = 190
PLOT_WIDTH = 780
ROW = 22
COLORS = {"kernel": "#9aa5b1", "restore": "#9aa5b1", "unit": "#8fbf9f", "stage": "#3b82c4", "module": "#7fb3e0",
          "ok": "#7fb3e0", "failed": "#d1495b", "skipped": "#c8ccd0"}
MARK_COLORS = {"milestone": "#6c757d", "ssh": "#2a9d8f", "done": "#e76f51", "released": "#6c757d"}

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2733; max-width: 1100px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; }
.meta { color: #55606e; margin: 0 0 16px; }
svg text { font: 11px system-ui, sans-serif; fill: #1d2733; }
svg .lane-title { font-weight: 600; font-size: 12px; }
svg .axis { stroke: #d5dae0; } svg .tick { fill: #55606e; }
table { border-collapse: collapse; margin: 4px 0 12px; }
th, td { text-align: left; padding: 3px 10px 3px 0; border-bottom: 1px solid #eceff2; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #23744b; } .failed, .FAIL { color: #b3261e; font-weight: 600; } .skipped { color: #6c757d; }
.summary { font-weight: 600; } pre { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: 12px; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _timeline_svg(lanes: list[Lane]) -> str:
    end = max([lane.end for lane in lanes] + [1.0]) * 1.02
    scale = PLOT_WIDTH / end

    def x(seconds: float) -> float:
        return LABEL_WIDTH + seconds * scale

    rows: list[str] = []
    y = 34
    step = next(s for s in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300) if end / s <= 12)
    ticks = []
    second = 0.0
    while second <= end:
        ticks.append(second)
        second += step
    lane_tops = []
    for lane in lanes:
        lane_tops.append(y)
        rows.append(f'<text class="lane-title" x="4" y="{y + 14}">{_e(lane.name)}</text>')
        y += ROW
        for bar in lane.bars:
            if bar.kind == "module":
                continue
            label = f"{bar.label} stage" if bar.kind == "stage" else bar.label
            rows.append(_bar(bar, label, x, scale, y, 16, COLORS["failed" if bar.status == "failed" else bar.kind]))
            y += ROW
            if bar.kind == "stage":
                modules = lane.modules(bar.label)
                if modules:
                    rows.append(f'<text x="14" y="{y + 12}" class="tick">modules ({len(modules)})</text>')
                    for module in modules:
                        color = COLORS.get(module.status, COLORS["module"])
                        rows.append(_bar(module, None, x, scale, y, 12, color))
                    y += ROW - 4
        marks_top = lane_tops[-1] + ROW
        rows_used = _label_rows(lane.marks, x)
        for (mark, (row, anchor_end)) in zip(lane.marks, rows_used):
            mx = x(mark.at)
            color = MARK_COLORS.get(mark.kind, "#6c757d")
            rows.append(f'<g class="mark {mark.kind}" data-at="{mark.at:.3f}" data-label="{_e(mark.label)}">'
                        f'<title>{_e(mark.label)} at {mark.at:.2f}s</title>'
                        f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{marks_top}" y2="{y + row * 13 + 2}" '
                        f'stroke="{color}" stroke-dasharray="3 3"/>'
                        f'<text x="{mx - 3 if anchor_end else mx + 3:.1f}" y="{y + 12 + row * 13}" '
                        f'fill="{color}" text-anchor="{"end" if anchor_end else "start"}">'
                        f'{_e(mark.label)} {mark.at:.1f}s</text></g>')
        y += (max((r for r, _ in rows_used), default=0) + 1) * 13 + 16
    height = y + 4
    axis = [f'<line class="axis" x1="{LABEL_WIDTH}" x2="{LABEL_WIDTH + PLOT_WIDTH}" y1="24" y2="24"/>']
    for tick in ticks:
        tx = x(tick)
        axis.append(f'<line class="axis" x1="{tx:.1f}" x2="{tx:.1f}" y1="20" y2="{height}"/>')
        if tx + 2 + len(f"{tick:g}s") * CHAR_WIDTH <= LABEL_WIDTH + PLOT_WIDTH + 10:  # only labels that fit
            axis.append(f'<text class="tick" x="{tx + 2:.1f}" y="16">{tick:g}s</text>')
    origin = "after the try started" if all(lane.restored for lane in lanes) else "after power-on"
    return (f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{LABEL_WIDTH + PLOT_WIDTH + 10}" '
            f'height="{height}" viewBox="0 0 {LABEL_WIDTH + PLOT_WIDTH + 10} {height}" data-end="{end:.3f}" '
            f'data-scale="{scale:.5f}" data-origin="{LABEL_WIDTH}" role="img" '
            f'aria-label="boot timeline, seconds {origin}">' + "".join(axis) + "".join(rows) + "</svg>")


CHAR_WIDTH = 6.4  # about what an 11 px sans-serif character takes (labels are laid out before drawing)


def _label_rows(marks, x) -> list[tuple[int, bool]]:
    """(row, anchored at its end) for each mark's label: the first row where it overlaps no other
    label; labels near the right edge end at their line, the others start there."""
    taken: list[list[tuple[float, float]]] = []
    out = []
    for mark in marks:
        mx = x(mark.at)
        width = len(f"{mark.label} {mark.at:.1f}s") * CHAR_WIDTH + 6
        anchor_end = mx + width > LABEL_WIDTH + PLOT_WIDTH
        span = (mx - width, mx) if anchor_end else (mx, mx + width)
        row = 0
        while row < len(taken) and any(a < span[1] and span[0] < b for a, b in taken[row]):
            row += 1
        if row == len(taken):
            taken.append([])
        taken[row].append(span)
        out.append((row, anchor_end))
    return out


def _bar(bar, label: Optional[str], x, scale: float, y: int, height: int, color: str) -> str:
    width = max(1.0, bar.seconds * scale)
    title = f"{bar.label}: {bar.start:.2f}s to {bar.end:.2f}s ({bar.seconds:.2f}s)"
    title += f", {bar.detail}" if bar.detail else ""
    text = f'<text x="14" y="{y + 12}">{_e(label)}</text>' if label else ""
    return (f'<g class="bar {bar.kind} {bar.status}" data-label="{_e(bar.label)}" data-kind="{bar.kind}" '
            f'data-start="{bar.start:.3f}" data-end="{bar.end:.3f}"><title>{_e(title)}</title>{text}'
            f'<rect x="{x(bar.start):.2f}" y="{y + (16 - height) // 2}" width="{width:.2f}" height="{height}" '
            f'rx="2" fill="{color}"/></g>')


def _lane_tables(lane: Lane, report: dict[str, Any]) -> str:
    out = [f"<h2>{_e(lane.name)}</h2>",
           f'<p class="meta">datasource {_e(report.get("datasource") or "-")}, status '
           f'<b>{_e(report.get("status") or "-")}</b>, agent time {_fmt(report.get("agent_seconds"))}, '
           f'SSH ready {_fmt(report.get("ssh_ready_at"))}</p>',
           "<table class=\"stages\"><tr><th>stage</th><th>started</th><th>finished</th><th>agent time</th>"
           "<th>modules</th><th>errors</th></tr>"]
    for name, stage in (report.get("stages") or {}).items():
        out.append(f"<tr><td>{_e(name)}</td><td class=num>{_fmt(stage.get('started_at'))}</td>"
                   f"<td class=num>{_fmt(stage.get('finished_at'))}</td><td class=num>{_fmt(stage.get('seconds'))}</td>"
                   f"<td class=num>{_e(stage.get('modules'))}</td><td class=num>{_e(stage.get('errors'))}</td></tr>")
    out.append("</table><table class=\"modules\"><tr><th>stage</th><th>module</th><th>status</th><th>time</th>"
               "<th>note</th></tr>")
    for stage in lane.stages():
        for module in lane.modules(stage.label):
            out.append(f'<tr class="module"><td>{_e(stage.label)}</td><td>{_e(module.label)}</td>'
                       f'<td class="{_e(module.status)}">{_e(module.status)}</td>'
                       f'<td class=num>{module.seconds:.2f}s</td><td>{_e(module.detail)}</td></tr>')
    out.append("</table>")
    for title in ("errors", "warnings"):
        if report.get(title):
            out.append(f"<h3>{title}</h3><ul>" + "".join(f"<li>{_e(item)}</li>" for item in report[title]) + "</ul>")
    return "".join(out)


def _fmt(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.1f}s"


def _checks_table(checks: list[Check], title: str) -> str:
    failed = [c for c in checks if not c.ok]
    rows = "".join(f'<tr class="check {"ok" if c.ok else "FAIL"}"><td class="{"ok" if c.ok else "FAIL"}">'
                   f'{"ok" if c.ok else "FAIL"}</td><td>{_e(c.subject)}</td><td>{_e(c.aspect)}</td>'
                   f"<td>{_e(c.expected)}</td><td>{_e(c.found)}</td><td class=num>{_e(c.line or '')}</td></tr>"
                   for c in sorted(checks, key=lambda c: c.ok))
    return (f'<h2>{_e(title)}</h2><p class="summary" id="checks-summary">{len(checks) - len(failed)} passed, '
            f"{len(failed)} failed</p><table class=\"checks\"><tr><th></th><th>what</th><th>aspect</th>"
            f"<th>expected</th><th>found</th><th>line</th></tr>{rows}</table>")


def render(title: str, lanes: list[Lane], reports: list[dict[str, Any]], checks: Optional[list[list[Check]]] = None,
           differences: Optional[str] = None, meta: str = "") -> str:
    parts = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{_e(title)}</h1><p class=\"meta\">{_e(meta)}</p>", _timeline_svg(lanes)]
    for index, (lane, report) in enumerate(zip(lanes, reports)):
        parts.append(_lane_tables(lane, report))
        if checks and index < len(checks) and checks[index] is not None:
            parts.append(_checks_table(checks[index], f"checks ({lane.name})"))
    if differences is not None:
        parts.append(f'<h2>differences</h2><pre id="differences">{_e(differences)}</pre>')
    parts.append("</body></html>\n")
    return "".join(parts)


def write(path: str, page: str) -> None:
    import os

    partial = f"{path}.partial"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(page)
    os.replace(partial, path)
