"""The boot timeline (terminal and ``--html``), from real lab boots' console logs, checked in Chromium.

The console logs and agent records in ``recorded/`` were kept from real lab runs (a full boot of
each agent for the same user-data by ``lab --compare``, and a try restored from a snapshot). They
are replayed into the lab's ``BootResult`` as the lab reads them while a VM runs; the timeline is
built and drawn; the page is opened in Debian's headless Chromium, a screenshot kept as a test
artefact (``$CLOUDSEED_TEST_ARTIFACTS``, default ``out/test-artifacts``), and what is drawn is read
back through the DevTools protocol: each bar where its times put it, no label outside the drawing,
no sideways scrolling, a table row per module, both agents on one axis.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile

import pytest
from browser import Browser, chromium

from cloudseed.lab import report_html
from cloudseed.lab.image import Image
from cloudseed.lab.report import report_dict
from cloudseed.lab.session import replay
from cloudseed.lab.timeline import build, render_text

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ARTIFACTS = os.environ.get("CLOUDSEED_TEST_ARTIFACTS") or os.path.join(REPO, "out", "test-artifacts")


def recorded(name: str) -> str:
    """A recorded file, unpacked (they are kept gzipped) into a directory of its own."""
    target = os.path.join(tempfile.mkdtemp(prefix="lab-recorded-"), name)
    with gzip.open(os.path.join(HERE, "recorded", f"{name}.gz"), "rb") as packed, open(target, "wb") as handle:
        handle.write(packed.read())
    return target


def boot(agent: str):
    """A full boot of ``agent`` ("cloudseed" or "reference") as the lab saw it."""
    name = "cloudseed" if agent == "cloudseed" else "cloud-init"
    image = Image(disk=f"/images/{agent}.raw", kernel="", initrd="", agent=agent, key=agent)
    result = replay(recorded(f"boot-{name}.console.log"), image)
    if agent == "reference":
        with open(recorded("boot-cloud-init.log")) as handle:
            result.agent_log = handle.read()
    return result


def a_try():
    image = Image(disk="/images/cloudseed.raw", kernel="", initrd="", agent="cloudseed", key="cloudseed")
    result = replay(recorded("try-cloudseed.console.log"), image)
    with open(recorded("try-cloudseed.records.json")) as handle:
        records = json.load(handle)
    result.status, result.result = records["status"], records["result"]
    return result


def test_full_boot_lane_has_kernel_units_stages_in_order_and_modules_inside_their_stage():
    lane = build(boot("cloudseed"), "cloudseed")
    kinds = [b.kind for b in lane.bars]
    assert kinds[0] == "kernel" and "unit" in kinds
    stages = lane.stages()
    assert [s.label for s in stages] == ["local", "network", "config", "final"]
    assert all(a.end <= b.start for a, b in zip(stages, stages[1:])), [(s.start, s.end) for s in stages]
    for stage in stages:
        for module in lane.modules(stage.label):
            assert stage.start - 0.01 <= module.start <= module.end <= stage.end + 0.3, (stage, module)
    network = [m.label for m in lane.modules("network")]
    assert "users_groups" in network and "write_files" in network
    marks = [m.label for m in lane.marks]
    # systemd's own lines stop once the serial console's getty starts: later targets may not show
    for expected in ("sysinit.target", "network.target", "network-online.target", "agent finished"):
        assert expected in marks
    assert next(b for b in lane.bars if b.label == "networking.service").end <= stages[1].start


def test_reference_lane_takes_modules_from_cloud_inits_log():
    lane = build(boot("reference"), "cloud-init")
    assert [s.label for s in lane.stages()] == ["local", "network", "config", "final"]
    assert "users_groups" in [m.label for m in lane.modules("network")]


def test_try_lane_starts_with_the_restore_and_counts_from_the_try():
    lane = build(a_try(), "try 1")
    assert lane.restored and lane.bars[0].kind == "restore" and lane.bars[0].start == 0.0
    assert lane.stages()[0].start > lane.bars[0].end
    assert "kernel" not in [b.kind for b in lane.bars]


def test_terminal_timeline_rows_and_marks():
    text = render_text([build(boot("cloudseed"), "cloudseed"), build(boot("reference"), "cloud-init")], width=60)
    lines = text.splitlines()
    assert lines[0].startswith("timeline (seconds after power-on; one column = ")
    assert "[cloudseed]" in lines and "[cloud-init]" in lines
    assert sum(1 for line in lines if line.startswith("network stage")) == 2
    assert all(len(line) < 110 for line in lines), max(lines, key=len)
    assert any(line.startswith("agent finished") and line.rstrip().endswith("s") for line in lines)


LAYOUT = """(() => {
  const svg = document.getElementById('timeline');
  const box = svg.getBoundingClientRect();
  const origin = +svg.dataset.origin, scale = +svg.dataset.scale;
  const bars = [...svg.querySelectorAll('g.bar')].map(g => {
    const r = g.querySelector('rect').getBoundingClientRect();
    return {label: g.dataset.label, kind: g.dataset.kind, start: +g.dataset.start, end: +g.dataset.end,
            x: r.left - box.left, width: r.width, height: r.height};
  });
  const marks = [...svg.querySelectorAll('g.mark')].map(g => {
    const r = g.querySelector('line').getBoundingClientRect();
    const t = g.querySelector('text').getBoundingClientRect();
    return {label: g.dataset.label, at: +g.dataset.at, x: r.left - box.left,
            text: [t.left, t.top, t.right, t.bottom]};
  });
  const outside = [...svg.querySelectorAll('text')].filter(t => {
    const r = t.getBoundingClientRect();
    return r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.width === 0;
  }).map(t => t.textContent);
  return {origin, scale, bars, marks, outside, lanes: [...svg.querySelectorAll('.lane-title')].map(t => t.textContent),
          sideways: document.documentElement.scrollWidth > window.innerWidth,
          moduleRows: document.querySelectorAll('tr.module').length,
          checks: (document.getElementById('checks-summary') || {}).textContent || null,
          differences: (document.getElementById('differences') || {}).textContent || null};
})()"""


def _page(tmp_path, name: str, results: list, names: list[str], **extra) -> tuple[dict, list]:
    if chromium() is None:
        pytest.skip("chromium is not installed (scripts/setup.sh)")
    lanes = [build(result, lane) for result, lane in zip(results, names)]
    path = tmp_path / f"{name}.html"
    report_html.write(str(path), report_html.render(f"lab report: {name}", lanes,
                                                    [report_dict(r) for r in results], **extra))
    os.makedirs(ARTIFACTS, exist_ok=True)
    with Browser(width=1100, height=900) as browser:
        browser.open(path.as_uri())
        layout = browser.evaluate(LAYOUT)
        browser.screenshot(os.path.join(ARTIFACTS, f"lab-report-{name}.png"))
        assert browser.console_errors() == []
    assert os.path.getsize(os.path.join(ARTIFACTS, f"lab-report-{name}.png")) > 10_000
    return layout, lanes


def _drawn_where_the_times_say(layout: dict, lanes: list) -> None:
    assert layout["outside"] == [], f"labels drawn outside the timeline: {layout['outside']}"
    assert layout["sideways"] is False
    drawn = [b for b in layout["bars"]]
    assert len(drawn) == sum(len(lane.bars) for lane in lanes)
    for bar in drawn:
        assert abs(bar["x"] - (layout["origin"] + bar["start"] * layout["scale"])) < 1.0, bar
        assert abs(bar["width"] - max(1.0, (bar["end"] - bar["start"]) * layout["scale"])) < 1.0, bar
        assert bar["height"] > 0
    for mark in layout["marks"]:
        assert abs(mark["x"] - (layout["origin"] + mark["at"] * layout["scale"])) < 1.5, mark
    for index, one in enumerate(layout["marks"]):  # no mark's label drawn over another's
        for other in layout["marks"][index + 1:]:
            a, b = one["text"], other["text"]
            overlap = a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5
            assert not overlap, (one, other)


def test_single_boot_page_in_chromium(tmp_path):
    result = boot("cloudseed")
    layout, lanes = _page(tmp_path, "boot", [result], ["cloudseed"])
    _drawn_where_the_times_say(layout, lanes)
    assert layout["lanes"] == ["cloudseed"]
    stages = [b["label"] for b in layout["bars"] if b["kind"] == "stage"]
    assert stages == ["local", "network", "config", "final"]
    assert layout["moduleRows"] == sum(len(lanes[0].modules(s)) for s in stages)
    assert {m["label"] for m in layout["marks"]} >= {"network-online.target", "agent finished"}


def test_both_agents_side_by_side_on_one_axis_in_chromium(tmp_path):
    results = [boot("cloudseed"), boot("reference")]
    layout, lanes = _page(tmp_path, "compare", results, ["cloudseed", "cloud-init"],
                          differences="users: tester: ...")
    _drawn_where_the_times_say(layout, lanes)
    assert layout["lanes"] == ["cloudseed", "cloud-init"]
    finished = {lane.name: lane.marks[-1].at for lane in lanes}
    assert finished["cloud-init"] > finished["cloudseed"]  # the same axis: the slower agent ends further right
    assert layout["differences"] == "users: tester: ..."


def test_try_page_with_checks_in_chromium(tmp_path):
    from cloudseed.lab.checks import Check

    checks = [Check("file /etc/x", "mode", False, "0600", "0644", 3), Check("user tester", "shell", True, "/bin/sh",
                                                                          "/bin/sh", 5)]
    layout, lanes = _page(tmp_path, "try", [a_try()], ["try 1"], checks=[checks])
    _drawn_where_the_times_say(layout, lanes)
    assert layout["checks"] == "1 passed, 1 failed"
    assert layout["bars"][0]["kind"] == "restore" and layout["bars"][0]["x"] == pytest.approx(layout["origin"], abs=1)
