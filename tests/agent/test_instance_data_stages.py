"""Instance data always describes the datasource in use, whichever stage found it (issue 12.1).

A real OpenStack-format metadata service on loopback; the target root has no cloud DMI, so the
local stage finds nothing and the network stage finds the service through ``metadata_urls``.
Each stage runs in a fresh ``Agent`` (as the four units do, one process each).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from cloudseed.agent.boot.stages import Agent
from tests.agent.openstack_service import IID, SYSTEM_CFG, serve

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def service():
    with serve() as url:
        yield url


def instance_data(root) -> dict:
    return json.loads(root.read_text("/run/cloudseed/instance-data.json"))


def test_network_stage_datasource_is_in_instance_data_of_every_later_stage(target, service):
    root = target
    root.write("/etc/cloudseed/cloud.cfg.d/50-test.cfg", SYSTEM_CFG % service)
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)

    assert Agent(root).run_local() == 0
    assert instance_data(root)["v1"]["instance_id"] is None  # nothing local: honest "none"

    assert Agent(root).run_network() == 0
    for stage in ("network", "config", "final"):
        if stage != "network":
            assert Agent(root).run_modules(stage) == 0
        data = instance_data(root)
        assert data["v1"]["instance_id"] == IID, stage
        assert data["v1"]["cloud_name"] == "openstack", stage
        assert data["instance_id"] == IID, stage
        assert data["v1"]["availability_zone"] == "zone-3", stage
        assert data["ds"]["meta_data"]["uuid"] == IID, stage
        sensitive = json.loads(root.read_text("/run/cloudseed/instance-data-sensitive.json"))
        assert sensitive["v1"]["instance_id"] == IID, stage

    assert root.read_text("/etc/seen-by-template") == f"{IID} openstack zone-3"
    query = subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, "query", "instance_id"],
                           capture_output=True, text=True, timeout=60, cwd=REPO)
    assert query.returncode == 0, query.stderr
    assert query.stdout.strip() == IID


def test_datasource_in_use_is_written_even_when_local_stage_wrote_none_first(target, service):
    """All four stages in one process (``cloudseed boot``): the same rule holds."""
    root = target
    root.write("/etc/cloudseed/cloud.cfg.d/50-test.cfg", SYSTEM_CFG % service)
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    assert Agent(root).run_all() == 0
    data = instance_data(root)
    assert (data["v1"]["instance_id"], data["v1"]["cloud_name"]) == (IID, "openstack")
