"""Events on a timeline, EC2's side: scheduled through the admin API and ``cloudseed instances events``,
seen at the right time by clients written as AWS documents them (SQLite and PostgreSQL).

AWS's interruption handling guide polls ``spot/instance-action`` (404 until the two-minute
warning, then ``{"action", "time"}``) and ``events/recommendations/rebalance`` with an IMDSv2
token every few seconds; Auto Scaling's lifecycle guide polls
``autoscaling/target-lifecycle-state``. ``poll_until`` is that loop (a short interval here). The
``ec2-metadata`` package (PyPI) reads the same paths with its own client. Faults: a path prefix
answers 5xx, or late, for the event's time, on any API.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from tests.provider.server.server_support import ROOT, ServerProcess, http, new_address


def register(server, **extra) -> tuple[str, str]:
    address = new_address()
    instance_id = f"tl-{address.replace('.', '-')}"
    fields = {"instance_id": instance_id, "hostname": "tl", "imds_tokens": "required",
              "addresses": [{"address": address, "network": "default"}], "ec2": {"life_cycle": "spot"}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address


def schedule(server, instance_id: str, **event) -> dict:
    reply = server.admin("POST", f"/v1/instances/{instance_id}/events", event)
    assert reply.status == 201, reply.text
    return reply.json()


class AwsPoller:
    """The polling loop of AWS's Spot interruption guide, with an IMDSv2 token, from ``source``."""

    def __init__(self, port: int, source: str):
        self.base, self.source = f"http://127.0.0.1:{port}", source
        self.token = self._request("PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "21600"})[1]

    def _request(self, method: str, path: str, headers: dict) -> tuple[int, str]:
        reply = http(int(self.base.rsplit(":", 1)[1]), path, method, source=self.source, headers=headers)
        return reply.status, reply.text

    def get(self, path: str) -> tuple[int, str]:
        return self._request("GET", path, {"X-aws-ec2-metadata-token": self.token})

    def poll_until(self, path: str, timeout: float, interval: float = 0.1) -> tuple[float, str]:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            status, body = self.get(path)
            if status == 200:
                return time.monotonic() - start, body
            assert status == 404, (status, body)  # "no notice yet" is a 404
            time.sleep(interval)
        raise AssertionError(f"{path}: nothing within {timeout} s")


def test_spot_interruption_notice_arrives_before_the_interruption(server):
    instance_id, address = register(server)
    poller = AwsPoller(server.port, address)
    assert poller.get("/latest/meta-data/spot/instance-action")[0] == 404
    listing = poller.get("/latest/meta-data/")[1].split("\n")
    assert "spot/" not in listing
    event = schedule(server, instance_id, kind="preempt", not_before="+3", details={"action": "stop",
                                                                                      "notice_seconds": 2})
    waited, body = poller.poll_until("/latest/meta-data/spot/instance-action", timeout=5)
    assert 0.5 <= waited <= 2.5  # the notice comes about 1 s in: 3 s before, minus 2 s of notice
    notice = json.loads(body)
    assert notice == {"action": "stop", "time": event["not_before_utc"]}
    assert poller.get("/latest/meta-data/spot/termination-time") == (200, event["not_before_utc"])
    assert "spot/" in poller.get("/latest/meta-data/")[1].split("\n")
    # canceled: gone again
    assert server.admin("PATCH", f"/v1/instances/{instance_id}/events/{event['event_id']}",
                        {"state": "canceled"}).status == 200
    deadline = time.monotonic() + 2
    while poller.get("/latest/meta-data/spot/instance-action")[0] != 404:
        assert time.monotonic() < deadline, "a canceled interruption is still served"
        time.sleep(0.05)


def test_rebalance_lifecycle_and_maintenance_move_with_time(server):
    instance_id, address = register(server, ec2={"target_lifecycle_state": "InService"})
    poller = AwsPoller(server.port, address)
    assert poller.get("/latest/meta-data/autoscaling/target-lifecycle-state") == (200, "InService")
    assert poller.get("/latest/meta-data/events/recommendations/rebalance")[0] == 404
    rebalance = schedule(server, instance_id, kind="rebalance", not_before="+1")
    schedule(server, instance_id, kind="lifecycle", not_before="+1.5", details={"state": "Terminated"})
    reboot = schedule(server, instance_id, kind="reboot", not_before="+0.5", duration_seconds=1.5,
                      details={"description": "host patching"})
    scheduled = json.loads(poller.get("/latest/meta-data/events/maintenance/scheduled")[1])
    assert [(e["Code"], e["State"], e["Description"]) for e in scheduled] == [
        ("instance-reboot", "active", "host patching")]
    assert scheduled[0]["EventId"].startswith("instance-event-")
    assert json.loads(poller.get("/latest/meta-data/events/maintenance/history")[1]) == []
    waited, body = poller.poll_until("/latest/meta-data/events/recommendations/rebalance", timeout=3)
    assert json.loads(body) == {"noticeTime": rebalance["not_before_utc"]}
    _, state = poller.poll_until("/latest/meta-data/autoscaling/target-lifecycle-state", timeout=3)
    deadline = time.monotonic() + 3
    while poller.get("/latest/meta-data/autoscaling/target-lifecycle-state")[1] != "Terminated":
        assert time.monotonic() < deadline, "the lifecycle state never changed"
        time.sleep(0.05)
    deadline = time.monotonic() + 3
    while json.loads(poller.get("/latest/meta-data/events/maintenance/scheduled")[1]):
        assert time.monotonic() < deadline, "the maintenance window never ended"
        time.sleep(0.05)
    history = json.loads(poller.get("/latest/meta-data/events/maintenance/history")[1])
    assert [(e["Code"], e["State"]) for e in history] == [("instance-reboot", "completed")]
    assert reboot["kind"] == "reboot"


EC2_METADATA_POLL = """
import json, sys, time, urllib3
from ec2_metadata import EC2Metadata
md = EC2Metadata(pool_manager=urllib3.PoolManager(source_address=(sys.argv[2], 0)))
md.service_url = sys.argv[1]
md.dynamic_url, md.metadata_url, md.userdata_url = (md.service_url + p for p in ("dynamic/", "meta-data/",
                                                                                   "user-data/"))
seen = {"before": md.spot_instance_action}
deadline = time.time() + 6
while time.time() < deadline:
    md.clear_all()
    action = md.spot_instance_action
    if action is not None:
        seen["action"] = [action.action, action.time.strftime("%Y-%m-%dT%H:%M:%SZ")]
        break
    time.sleep(0.1)
seen["lifecycle"] = md.autoscaling_target_lifecycle_state
print(json.dumps(seen))
"""


def test_ec2_metadata_package_sees_the_interruption(server):
    instance_id, address = register(server)
    event = schedule(server, instance_id, kind="preempt", not_before="+2.5", details={"notice_seconds": 2})
    schedule(server, instance_id, kind="lifecycle", not_before="+0", details={"state": "Warmed:Stopped"})
    proc = subprocess.run([sys.executable, "-c", EC2_METADATA_POLL, f"http://127.0.0.1:{server.port}/latest/",
                           address], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["before"] is None
    assert seen["action"] == ["terminate", event["not_before_utc"]]
    assert seen["lifecycle"] == "Warmed:Stopped"


def test_cli_schedules_and_a_second_server_sees_it(db_url, server, tmp_path):
    """``cloudseed instances events`` writes the registry; both servers of it serve the event (the
    change feed), and a restarted server still does."""
    instance_id, address = register(server)
    other = ServerProcess(db_url, str(tmp_path / "second"), ["127.0.0.1:0"], config={"rate_limit": 0})
    try:
        pollers = [AwsPoller(server.port, address), AwsPoller(other.port, address)]
        for poller in pollers:  # both have the instance cached without the event
            assert poller.get("/latest/meta-data/events/recommendations/rebalance")[0] == 404
        cli = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db_url, "events", "add",
                              instance_id, "--kind", "rebalance", "--at", "+0"], cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        for poller in pollers:
            waited, _ = poller.poll_until("/latest/meta-data/events/recommendations/rebalance", timeout=3)
            assert waited < 1.5  # within the change feed's delay
        listed = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db_url, "events", "list",
                                 instance_id, "--json"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert [e["kind"] for e in json.loads(listed.stdout)] == ["rebalance"]
    finally:
        other.stop()
    restarted = ServerProcess(db_url, str(tmp_path / "third"), ["127.0.0.1:0"], config={"rate_limit": 0})
    try:
        assert AwsPoller(restarted.port, address).get("/latest/meta-data/events/recommendations/rebalance")[0] == 200
    finally:
        restarted.stop()


def test_faults_answer_5xx_or_late_then_stop(server):
    instance_id, address = register(server, imds_tokens="optional", clouds={"oracle": {}})
    assert server.get("/latest/meta-data/instance-id", address).status == 200  # on the hot path now
    schedule(server, instance_id, kind="fault", not_before="+0", duration_seconds=1.5,
             details={"path_prefix": "/latest/meta-data/", "status": 503})
    slow = schedule(server, instance_id, kind="fault", not_before="+0", duration_seconds=3,
                    details={"path_prefix": "/opc/", "delay_seconds": 0.8})
    deadline = time.monotonic() + 2
    while server.get("/latest/meta-data/instance-id", address).status != 503:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert server.get("/latest/user-data", address).status in (200, 404)  # outside the prefix
    # the slow one is slow for this instance only, and the server answers others meanwhile
    _, bystander = register(server, imds_tokens="optional")
    results = {}

    def slow_read():
        start = time.monotonic()
        reply = server.get("/opc/v1/instance/id", address)
        results["slow"] = (reply.status, reply.text, time.monotonic() - start)

    thread = threading.Thread(target=slow_read)
    thread.start()
    time.sleep(0.1)
    start = time.monotonic()
    assert server.get("/latest/meta-data/instance-id", bystander).status == 200
    assert time.monotonic() - start < 0.5
    thread.join(5)
    status, text, took = results["slow"]
    assert status == 200 and text == instance_id and took >= 0.75
    time.sleep(1.6)  # the 503 window (1.5 s) is over
    assert server.get("/latest/meta-data/instance-id", address).status == 200
    assert server.admin("DELETE", f"/v1/instances/{instance_id}/events/{slow['event_id']}").status == 204
    start = time.monotonic()
    assert server.get("/opc/v1/instance/id", address).status == 200
    assert time.monotonic() - start < 0.5


@pytest.mark.parametrize("body, field", [
    ({"kind": "preempt", "not_before": "soon"}, "not_before"),
    ({"kind": "fault", "details": {"path_prefix": "/"}, "duration_seconds": 5}, "details"),
    ({"kind": "rebalance", "colour": "red"}, "colour"),
    ({"not_before": "+5"}, "kind"),
    ({"kind": "rebalance", "not_after": "+5", "duration_seconds": 5}, "duration_seconds"),
])
def test_admin_api_refuses_bad_events_naming_the_field(server, body, field):
    instance_id, _ = register(server)
    reply = server.admin("POST", f"/v1/instances/{instance_id}/events", body)
    assert reply.status == 400 and reply.json()["field"] == field, reply.text
    assert server.admin("POST", "/v1/instances/nobody/events", {"kind": "rebalance"}).status == 404
    assert server.admin("GET", f"/v1/instances/{instance_id}/events/nope").status == 404


