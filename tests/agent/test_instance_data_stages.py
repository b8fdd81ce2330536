"""Instance data always describes the datasource in use, whichever stage found it (issue 12.1).

A real OpenStack-format metadata service on loopback; the target root has no cloud DMI, so the
local stage finds nothing and the network stage finds the service through ``metadata_urls``.
Each stage runs in a fresh ``Agent`` (as the four units do, one process each).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cloudseed.agent.boot.stages import Agent

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IID = "5b9a6c3e-7e61-4d6c-9a4a-3d1f0c0ffee1"
META = {"uuid": IID, "hostname": "svc-host", "name": "svc-host", "availability_zone": "zone-3",
        "public_keys": {"k": "ssh-ed25519 AAAAsvcKey svc@example"}}
USER_DATA = textwrap.dedent("""\
    ## template: jinja
    #cloud-config
    write_files:
      - path: /etc/seen-by-template
        content: "{{ v1.instance_id }} {{ v1.cloud_name }} {{ v1.availability_zone }}"
    """)
SYSTEM_CFG = textwrap.dedent("""\
    network: {config: disabled}
    datasource_list: [OpenStack, None]
    datasource:
      OpenStack: {metadata_urls: ["%s"], max_wait: 5, timeout: 2, retries: 0}
    cloud_init_modules: [write_files]
    cloud_config_modules: []
    cloud_final_modules: []
    """)


def _files() -> dict[str, bytes]:
    version = "2018-08-27"
    return {
        "/openstack": b"2012-08-10\n2018-08-27\nlatest\n",
        f"/openstack/{version}/meta_data.json": json.dumps(META).encode(),
        f"/openstack/{version}/user_data": USER_DATA.encode(),
    }


@contextlib.contextmanager
def _serve():
    """An OpenStack-format metadata service on loopback; yields its URL."""
    files = _files()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = files.get(self.path.rstrip("/") or "/")
            self.send_response(200 if body is not None else 404)
            body = body if body is not None else b"not found"
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def service():
    with _serve() as url:
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
