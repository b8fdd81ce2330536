"""Search one network datasource in a temporary root, with short limits, and time the search
(the Vultr-protocol clouds' tests: Vultr, NWCS, UpCloud)."""

from __future__ import annotations

import time

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.state import Paths


def context(target, cfg=None, cmdline="") -> DatasourceContext:
    return DatasourceContext(root=target, cfg=cfg or {}, cmdline=cmdline, paths=Paths(target), stage="network")


LIMITS = {"max_wait": 1, "timeout": 1, "retries": 1}


def search(target, name: str, settings: dict):
    started = time.monotonic()
    found = find_datasource(context(target, {"datasource": {name: {**LIMITS, **settings}}}), [name])
    return found, time.monotonic() - started
