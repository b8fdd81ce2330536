"""``--html FILE``: the lab's report as one self-contained page (inline CSS and SVG, no script).

The timeline (``timeline.py`` lanes: one run, or both agents of ``--compare``) is the fleet
page's drawing (``provider/server/admin/timeline_svg.py``, with the fleet's own style): per lane a row
for the kernel or a try's restore, for each long systemd unit, each stage with its modules
beneath it, and each mark (systemd targets, SSH ready, the agent finished) as a bar of no length;
every lane on the same time axis. Below it: the stages and modules of each run, the checks of
``--expect`` and the differences of ``--compare``.
"""

from __future__ import annotations

import html
import os
from typing import Any, Optional

from cloudseed.lab.reports.checks import Check
from cloudseed.lab.reports.timeline import Lane

# the lab's bars in the fleet page's drawing (provider/server/admin/timeline_svg.py): results as it names them
STATUS = {"ok": "ok", "failed": "fail", "skipped": "skipped", "mark": "mark"}
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # cloudseed
FLEET_CSS = os.path.join(PACKAGE_DIR, "data", "fleet", "fleet.css")

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2733; max-width: 1100px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; } h3 { font-size: 14px; }
.meta { color: #55606e; margin: 0 0 16px; }
table { border-collapse: collapse; margin: 4px 0 12px; }
th, td { text-align: left; padding: 3px 10px 3px 0; border-bottom: 1px solid #eceff2; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #23744b; } .failed, .FAIL { color: #b3261e; font-weight: 600; } .skipped { color: #6c757d; }
.summary { font-weight: 600; } pre { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: 12px; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fleet_css() -> str:
    """The fleet page's rules for its timeline, so the drawing looks the same here."""
    try:
        with open(FLEET_CSS, encoding="utf-8") as handle:
            return "".join(line for line in handle if line.startswith("svg.timeline"))
    except OSError:
        return ""


def fleet_bars(lane: Lane) -> list:
    """A lane as the fleet drawing's bars: kernel or restore, long units, each stage with its modules
    beneath it, then each mark (systemd targets, SSH ready, agent finished) as a bar of no length."""
    from cloudseed.provider.server.admin.timeline_svg import Bar as FleetBar

    out = []
    for bar in lane.bars:
        if bar.kind == "module":
            continue
        label = f"{bar.label} stage" if bar.kind == "stage" else bar.label
        out.append(FleetBar(label, bar.start, bar.end, STATUS.get(bar.status, "ok"), bar.detail, 0))
        if bar.kind == "stage":
            out.extend(FleetBar(m.label, m.start, m.end, STATUS.get(m.status, "ok"), m.detail, 1)
                       for m in lane.modules(bar.label))
    out.extend(FleetBar(mark.label, mark.at, mark.at, "mark", f"at {mark.at:.2f}s", 0) for mark in lane.marks)
    return out


def timeline_html(lanes: list[Lane]) -> str:
    """Each lane drawn as the fleet page draws a boot, all on one time axis."""
    from cloudseed.provider.server.admin import timeline_svg

    span = max([lane.end for lane in lanes] + [1.0])
    origin = "after the try started" if all(lane.restored for lane in lanes) else "after power-on"
    parts = [f'<p class="meta">seconds {origin}; hover a bar for its times</p>']
    for lane in lanes:
        drawing = timeline_svg.render(fleet_bars(lane), f"{lane.name} boot", span)
        parts.append(f'<div class="lane" data-lane="{_e(lane.name)}" data-span="{span:.3f}">'
                     f'<h3>{_e(lane.name)}</h3>{drawing}</div>')
    return "".join(parts)


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
             f"<title>{_e(title)}</title><style>{CSS}{_fleet_css()}</style></head><body>",
             f"<h1>{_e(title)}</h1><p class=\"meta\">{_e(meta)}</p>", timeline_html(lanes)]
    for index, (lane, report) in enumerate(zip(lanes, reports)):
        parts.append(_lane_tables(lane, report))
        if checks and index < len(checks) and checks[index] is not None:
            parts.append(_checks_table(checks[index], f"checks ({lane.name})"))
    if differences is not None:
        parts.append(f'<h2>differences</h2><pre id="differences">{_e(differences)}</pre>')
    parts.append("</body></html>\n")
    return "".join(parts)


def write(path: str, page: str) -> None:
    partial = f"{path}.partial"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(page)
    os.replace(partial, path)
