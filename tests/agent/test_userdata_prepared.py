"""A new instance's user-data parsed and checked before the network stage (``userdata_stage.prepare``,
while networking comes up): the stage that follows is the same as without it, parses no document
and checks no config again when they are the same, and nothing is fetched, written or run early.

Real stages over a NoCloud seed in a temporary root; a real HTTP server on loopback for ``#include``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cloudseed.agent.boot import userdata_stage
from cloudseed.agent.boot.stages import BootState, run_local, run_network
from cloudseed.agent.config import schema

MODULES = "network:\n  config: disabled\nssh_genkeytypes: []\ncloud_init_modules: [write_files]\n"
USER_DATA = ("#cloud-config\nwrite_files:\n  - {path: /etc/prepared, content: p}\n"
             "no_such_key: 1\nruncmd: [[echo, hi]]\n")
IDIR = "/var/lib/cloudseed/instances/iid-prepared"


def _seed(target, user_data: str, vendor_data: str | None = None):
    target.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES)
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-prepared\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data", user_data)
    if vendor_data is not None:
        target.write("/var/lib/cloud/seed/nocloud/vendor-data", vendor_data)
    state = BootState.load(target)
    assert run_local(state) == 0
    return state


@pytest.fixture
def checks(monkeypatch):
    """How many times the schema check itself ran (the real one, counted)."""
    calls: list[int] = []
    real = schema.validate_config

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(schema, "validate_config", counted)
    return calls


def _outcome(target) -> tuple:
    v1 = json.loads(target.read_text("/run/cloudseed/status.json"))["v1"]["init"]
    return (v1["errors"], v1["warnings"], target.read_text(f"{IDIR}/cloud-config.json"),
            target.read_text(f"{IDIR}/cloud-config.parsed.json"), target.read_text(f"{IDIR}/user-data.processed.json"),
            target.read_text("/etc/prepared"))


def test_the_stage_after_prepare_is_the_same_and_checks_nothing_again(tmp_path, checks):
    from cloudseed.core.root import TargetRoot

    outcomes = []
    for prepared in (False, True):
        root = tmp_path / f"root-{prepared}"
        (root / "etc").mkdir(parents=True)
        (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
        (root / "etc/group").write_text("root:x:0:\n")
        (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
        target = TargetRoot(str(root))
        state = _seed(target, USER_DATA)
        if prepared:
            userdata_stage.prepare(state)
            assert len(checks) == 2 and not target.exists(IDIR + "/user-data.txt")  # checked; nothing written
        assert run_network(state) == 0
        outcomes.append(_outcome(target))
    assert len(checks) == 2  # one check without prepare, one in prepare, none in the stage after it
    assert outcomes[0] == outcomes[1]
    assert any("no_such_key" in w for w in outcomes[1][1])


def test_a_config_the_stage_makes_otherwise_is_checked_there(target, checks):
    """vendor-data merges under the user's config: the stage's config is not the one prepared."""
    state = _seed(target, USER_DATA, vendor_data="#cloud-config\nntp: {enabled: false}\n")
    userdata_stage.prepare(state)
    assert checks == [] and state.prepared["checks"] == {}
    assert run_network(state) == 0
    assert checks == [1]
    assert json.loads(target.read_text(f"{IDIR}/cloud-config.json"))["ntp"] == {"enabled": False}


def test_an_include_is_not_fetched_before_the_stage(target):
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            hits.append(self.path)
            body = b"#cloud-config\nwrite_files:\n  - {path: /etc/prepared, content: included}\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        state = _seed(target, f"#include\nhttp://127.0.0.1:{server.server_address[1]}/part\n")
        userdata_stage.prepare(state)
        assert hits == []
        assert run_network(state) == 0
        assert hits == ["/part"] and target.read_text("/etc/prepared") == "included"
    finally:
        server.shutdown()
        server.server_close()


def test_signed_user_data_is_left_to_the_stage(target):
    state = _seed(target, USER_DATA)
    state.system_cfg = {**state.system_cfg, "require_signed_userdata": True}
    userdata_stage.prepare(state)
    assert state.prepared is None
