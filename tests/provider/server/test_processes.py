"""``processes: 2``: two server processes on one port (SO_REUSEPORT) behave as one server.

Connections land on either process; each must identify instances, accept IMDSv2 tokens the other
issued (the key is shared through the registry), see admin changes made through the first
process's admin listener, come back after a crash, and stop with the first one.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.provider.server.server_support import ServerProcess, new_address


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def _wait_for(condition, seconds: float = 15.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("db") / "server.db")
    proc = ServerProcess(db, str(tmp_path_factory.mktemp("two")), ["127.0.0.1:0"],
                         config={"rate_limit": 0, "processes": 2})
    _wait_for(lambda: proc.log().count("serving on") == 2)  # the worker listens too
    yield proc
    proc.stop()


def test_every_connection_is_answered_by_either_process(two):
    address = new_address()
    two.add(instance_id="i-two-1", hostname="two1", addresses=[{"address": address, "network": "n"}])
    for _ in range(40):  # new connection each time: the kernel spreads them over both processes
        reply = two.get("/latest/meta-data/hostname", address)
        assert reply.status == 200 and reply.text == "two1"
    counts = two.admin("GET", "/metrics", token=None).text
    served_here = sum(int(line.rsplit(" ", 1)[1]) for line in counts.splitlines()
                      if line.startswith('cloudseed_requests_total{api="ec2"'))
    assert 0 < served_here < 40, "the first process answered none or all: the second one is not serving"
    assert "cloudseed_processes 2" in counts


def test_tokens_and_admin_changes_reach_both_processes(two):
    address = new_address()
    two.add(instance_id="i-two-2", hostname="before", addresses=[{"address": address, "network": "n"}],
            imds_tokens="required")
    for _ in range(10):
        token = two.get("/latest/api/token", address, method="PUT",
                        headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}).text
        for _ in range(4):
            reply = two.get("/latest/meta-data/hostname", address, headers={"X-aws-ec2-metadata-token": token})
            assert reply.status == 200 and reply.text == "before"
    assert two.admin("PATCH", "/v1/instances/i-two-2", {"hostname": "after"}).status == 200
    time.sleep(1.0)
    token = two.get("/latest/api/token", address, method="PUT",
                    headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}).text
    for _ in range(20):
        assert two.get("/latest/meta-data/hostname", address,
                       headers={"X-aws-ec2-metadata-token": token}).text == "after"


def test_a_crashed_worker_is_started_again_and_all_stop_together(tmp_path):
    proc = ServerProcess(str(tmp_path / "server.db"), str(tmp_path / "run"), ["127.0.0.1:0"],
                         config={"rate_limit": 0, "processes": 2, "worker_restart_interval": 0.5})
    try:
        _wait_for(lambda: proc.log().count("serving on") == 2)
        first = _children(proc.proc.pid)
        assert len(first) == 1
        os.kill(first[0], signal.SIGKILL)
        again = _wait_for(lambda: [p for p in _children(proc.proc.pid) if p != first[0]], 20)
        _wait_for(lambda: proc.log().count("serving on") == 3)
        assert "exited with status -9; starting it again" in proc.log()
        address = new_address()
        proc.add(instance_id="i-two-3", hostname="three", addresses=[{"address": address, "network": "n"}])
        for _ in range(20):
            assert proc.get("/openstack/latest/meta_data.json", address).json()["hostname"] == "three"
    finally:
        assert proc.stop() == 0
    assert not os.path.exists(f"/proc/{again[0]}"), "the worker outlived the server"
