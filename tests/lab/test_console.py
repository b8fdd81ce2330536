"""Console markers the lab follows: cloudseed stages, the reference's lines, the collector."""

from __future__ import annotations

import gzip
import os
import threading
import time

from cloudseed.lab.machine.console import Console, Line, parse_event, read_log, sshd_started_at

RECORDED = os.path.join(os.path.dirname(__file__), "recorded")


def test_cloudseed_stage_markers():
    start = parse_event(Line(3.0, "[   37.49] cloudseed[203]: cloudseed: stage local start"))
    assert (start.kind, start.stage, start.at) == ("stage-start", "local", 3.0)
    done = parse_event(Line(4.0, "cloudseed[343]: cloudseed: stage network finished in 4.94s (12 modules, 1 errors)"))
    assert (done.kind, done.stage, done.seconds, done.modules, done.errors) == ("stage-done", "network", 4.94, 12, 1)
    final = parse_event(Line(5.0, "cloudseed: finished at Sat, 21 Nov 2026, datasource NoCloud, up 73.80 seconds"))
    assert final.kind == "agent-done"


def test_reference_markers():
    event = parse_event(Line(1.0, "Cloud-init v. 22.4.2 running 'modules:config' at Thu, 01 Jan. Up 40.1 seconds."))
    assert (event.kind, event.stage) == ("stage-start", "config")  # cloud-init's stages get the lab's names
    assert parse_event(Line(2.0, "Cloud-init v. 22.4.2 finished at Thu. Datasource DataSourceNoCloud.")).kind \
        == "agent-done"


def test_collector_lines_carry_json():
    event = parse_event(Line(9.0, 'cloudseed-lab: status {"datasource": "NoCloud", "errors": []}'))
    assert (event.kind, event.stage, event.data["datasource"]) == ("collected", "status", "NoCloud")
    broken = parse_event(Line(9.0, "cloudseed-lab: result {not json"))
    assert "unparsed" in broken.data
    assert parse_event(Line(1.0, "an ordinary line")) is None


def test_console_tails_a_growing_file(tmp_path):
    path = str(tmp_path / "serial.out")
    alive = threading.Event()
    alive.set()
    log = open(str(tmp_path / "log"), "w")  # noqa: SIM115 - the console writes it from its thread
    console = Console(time.monotonic(), log)
    console.follow_file(path, alive.is_set)
    with open(path, "wb") as out:
        out.write(b"\x1b[0;32mboot\r\ncloudseed: stage local st")
        out.flush()
        time.sleep(0.2)
        out.write(b"art\n")
        out.flush()
        event = console.wait_event(lambda e: e.kind == "stage-start", 5)
        assert event is not None and event.stage == "local"
        out.write(b"cloudseed: finished at x\n")
    alive.clear()
    assert console.wait_event(lambda e: e.kind == "agent-done", 5) is not None
    assert console.wait_event(lambda e: False, 5) is None and console.closed
    log.close()
    assert console.lines[0].text == "boot"  # colour codes and carriage returns stripped
    assert os.path.getsize(str(tmp_path / "log")) > 0


def test_sshd_started_read_from_real_consoles(tmp_path):
    """systemd's "Started ssh.service" line, in a lab reboot's console (series X, 2026-11-28:
    ``recorded/reboot-cloudseed.console-excerpt.log``) and a whole first boot with Debian's cloud-init;
    "Starting", "Stopping" and "Stopped" lines do not count."""
    excerpt = os.path.join(RECORDED, "reboot-cloudseed.console-excerpt.log")
    assert sshd_started_at(read_log(excerpt)) == 15.470
    whole = str(tmp_path / "boot-cloud-init.console.log")
    with gzip.open(os.path.join(RECORDED, "boot-cloud-init.console.log.gz")) as packed, open(whole, "wb") as out:
        out.write(packed.read())
    assert sshd_started_at(read_log(whole)) == 176.138
    # this recorded cloudseed boot's console lost the line ("Starting" at 99.896, no "Started"): no reading
    with gzip.open(os.path.join(RECORDED, "boot-cloudseed.console.log.gz")) as packed, open(whole, "wb") as out:
        out.write(packed.read())
    assert sshd_started_at(read_log(whole)) is None


def test_sshd_started_in_the_description_only_status_format():
    """Older systemd status lines name only the unit's description."""
    lines = [Line(3.0, "         Starting OpenBSD Secure Shell server..."),
             Line(4.5, "[  OK  ] Started OpenBSD Secure Shell server."),
             Line(9.0, "[  OK  ] Started ssh.service - OpenBSD Secure Shell server.")]
    assert sshd_started_at(lines) == 4.5
