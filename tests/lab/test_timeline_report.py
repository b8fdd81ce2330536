"""The boot timeline (terminal and ``--html``), from real lab boots' console logs, checked in Chromium.

The console logs and agent records in ``recorded/`` were kept from real lab runs (a full boot of
each agent for the same user-data by ``lab --compare``, and a try restored from a snapshot). They
are replayed into the lab's ``BootResult`` as the lab reads them while a VM runs; the timeline is
built and drawn (the fleet page's drawing); the page is opened in Debian's headless Chromium (the
fleet tests' driver, ``tests/provider/server/browser.py``), a screenshot kept as a test artefact
(``$CLOUDSEED_ARTEFACTS``, default the test's temporary directory), and what is drawn is read back
through the DevTools protocol: each bar in its row where its times put it, labels in the label
column, nothing outside a drawing, no sideways scrolling, a table row per module, one axis for both.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile

import pytest

from cloudseed.lab.boots.session import replay
from cloudseed.lab.images.image import Image
from cloudseed.lab.reports import report_html
from cloudseed.lab.reports.report import report_dict
from cloudseed.lab.reports.timeline import build, render_text
from cloudseed.provider.server.admin import timeline_svg
from tests.provider.server.browser import CHROMIUM, Browser

HERE = os.path.dirname(os.path.abspath(__file__))


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
  const lanes = [...document.querySelectorAll('div.lane')].map(div => {
    const svg = div.querySelector('svg.timeline');
    const box = svg.getBoundingClientRect();
    const bars = [...svg.querySelectorAll('g.bar')].map(g => {
      const r = g.querySelector('rect').getBoundingClientRect();
      const t = g.querySelector('text').getBoundingClientRect();
      return {name: g.dataset.name, status: g.dataset.status, x: r.left - box.left, width: r.width,
              height: r.height, top: r.top, label: [t.left - box.left, t.right - box.left, t.top, t.bottom]};
    });
    const outside = [...svg.querySelectorAll('text')].filter(t => {
      const r = t.getBoundingClientRect();
      return r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.width === 0;
    }).map(t => t.textContent);
    return {name: div.dataset.lane, span: +div.dataset.span, bars, outside};
  });
  return {lanes, sideways: document.documentElement.scrollWidth > window.innerWidth,
          moduleRows: document.querySelectorAll('tr.module').length,
          checks: (document.getElementById('checks-summary') || {}).textContent || null,
          differences: (document.getElementById('differences') || {}).textContent || null};
})()"""


def _page(tmp_path, name: str, results: list, names: list[str], **extra) -> tuple[dict, list]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (scripts/setup.sh)")
    lanes = [build(result, lane) for result, lane in zip(results, names)]
    path = tmp_path / f"{name}.html"
    report_html.write(str(path), report_html.render(f"lab report: {name}", lanes,
                                                    [report_dict(r) for r in results], **extra))
    folder = os.environ.get("CLOUDSEED_ARTEFACTS") or str(tmp_path)
    browser = Browser()
    try:
        browser.navigate(path.as_uri())
        layout = browser.evaluate(LAYOUT)
        browser.screenshot(os.path.join(folder, f"lab-report-{name}.png"))
        assert browser.console_errors() == []
    finally:
        browser.close()
    assert os.path.getsize(os.path.join(folder, f"lab-report-{name}.png")) > 10_000
    return layout, lanes


def _drawn_where_the_times_say(layout: dict, lanes: list) -> None:
    """Every bar in its row where its start and length put it on the shared axis, every label in the
    label column, nothing outside a drawing, no sideways scrolling."""
    assert layout["sideways"] is False
    span = max(lane.end for lane in lanes)
    assert [drawn["name"] for drawn in layout["lanes"]] == [lane.name for lane in lanes]
    for drawn, lane in zip(layout["lanes"], lanes):
        assert drawn["outside"] == [], f"labels drawn outside the timeline: {drawn['outside']}"
        assert drawn["span"] == pytest.approx(span, abs=0.001)
        expected = report_html.fleet_bars(lane)
        assert [b["name"] for b in drawn["bars"]] == [e.label for e in expected]
        scale = timeline_svg.PLOT_WIDTH / span
        for bar, want in zip(drawn["bars"], expected):
            assert abs(bar["x"] - (timeline_svg.LABEL_WIDTH + want.start * scale)) < 1.0, (bar, want)
            assert abs(bar["width"] - max(2.0, want.seconds * scale)) < 1.0, (bar, want)
            assert bar["height"] > 0 and bar["label"][1] <= timeline_svg.LABEL_WIDTH, bar
        tops = [bar["top"] for bar in drawn["bars"]]
        assert tops == sorted(tops) and len(set(tops)) == len(tops)  # one row each, in order


def test_single_boot_page_in_chromium(tmp_path):
    result = boot("cloudseed")
    layout, lanes = _page(tmp_path, "boot", [result], ["cloudseed"])
    _drawn_where_the_times_say(layout, lanes)
    names = [b["name"] for b in layout["lanes"][0]["bars"]]
    assert [n for n in names if n.endswith(" stage")] == ["local stage", "network stage", "config stage", "final stage"]
    assert layout["moduleRows"] == sum(len(lanes[0].modules(s)) for s in ("local", "network", "config", "final"))
    assert {"network-online.target", "agent finished", "kernel", "networking.service"} <= set(names)


def test_both_agents_side_by_side_on_one_axis_in_chromium(tmp_path):
    results = [boot("cloudseed"), boot("reference")]
    layout, lanes = _page(tmp_path, "compare", results, ["cloudseed", "cloud-init"],
                          differences="users: tester: ...")
    _drawn_where_the_times_say(layout, lanes)
    finished = {drawn["name"]: next(b["x"] for b in drawn["bars"] if b["name"] == "agent finished")
                for drawn in layout["lanes"]}
    assert finished["cloud-init"] > finished["cloudseed"] + 100  # one axis: the slower agent ends further right
    assert layout["differences"] == "users: tester: ..."


def test_try_page_with_checks_in_chromium(tmp_path):
    from cloudseed.lab.reports.checks import Check

    checks = [Check("file /etc/x", "mode", False, "0600", "0644", 3), Check("user tester", "shell", True, "/bin/sh",
                                                                          "/bin/sh", 5)]
    layout, lanes = _page(tmp_path, "try", [a_try()], ["try 1"], checks=[checks])
    _drawn_where_the_times_say(layout, lanes)
    assert layout["checks"] == "1 passed, 1 failed"
    first = layout["lanes"][0]["bars"][0]
    assert first["name"] == "restore" and first["x"] == pytest.approx(timeline_svg.LABEL_WIDTH, abs=1)
