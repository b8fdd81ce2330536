"""Reporting events against cloud-init 26.x: the same start and finish events read the same, as the
dict its handlers send (webhook, the metadata server) and as the line its log handler writes,
``duration`` included (cloud-init 26.1 reports each finish's duration)."""

from __future__ import annotations

import json

import pytest

from cloudseed.agent.reporting import Event
from tests.reference import NEW

CASES = [
    ("start", "init-network", "searching for network datasources", None, None),
    ("finish", "init-network", "found network data from DataSourceNoCloud", "SUCCESS", 1.23456),
    ("finish", "modules-config/config-runcmd", "config-runcmd ran successfully", "SUCCESS", 0.0),
    ("finish", "init-network/config-bootcmd", "bootcmd: expected a list", "FAIL", 0.00049),
    ("finish", "modules-final", "running modules for final", "WARN", 12.5),
]

_THEIRS = r"""
import json, sys
from cloudinit.reporting import events
out = []
for kind, name, description, result, duration in json.loads(sys.argv[1]):
    if kind == "start":
        event = events.ReportingEvent(events.START_EVENT_TYPE, name, description, timestamp=1700000000.0)
    else:
        event = events.FinishReportingEvent(name, description, duration, result=result)
        event.timestamp = 1700000000.0
    out.append([event.as_dict(), event.as_string()])
print(json.dumps(out))
"""


@pytest.mark.reference
def test_events_read_as_cloud_init_26_writes_them():
    theirs = json.loads(NEW.python(_THEIRS, json.dumps(CASES)).stdout)
    for case, (their_dict, their_line) in zip(CASES, theirs):
        kind, name, description, result, duration = case
        event = Event(kind, name, description, 1700000000.0, result, duration)
        assert event.as_dict() == their_dict, case
        assert event.as_string() == their_line, case
