"""Admin REST API, change propagation between servers, metrics, health, rate limits, access log,
graceful shutdown, and the ``cloudseed instances`` command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.provider.server.server_support import ADMIN_TOKEN, ROOT, ServerProcess, new_address


def test_admin_crud_and_list_filters(server):
    address = new_address()
    created = server.add(instance_id="i-admin-1", hostname="adm1", addresses=[address], tags=["blue"],
                         project_id="p-admin")
    assert created["instance_id"] == "i-admin-1" and created["password_set"] is False
    server.add(instance_id="i-admin-2", hostname="adm2", addresses=[new_address()], project_id="p-admin")
    shown = server.admin("GET", "/v1/instances/i-admin-1").json()
    assert shown["addresses"] == [{"address": address, "network": "default"}]
    listed = server.admin("GET", "/v1/instances?project_id=p-admin").json()["instances"]
    assert [r["instance_id"] for r in listed] == ["i-admin-1", "i-admin-2"]
    assert [r["instance_id"] for r in server.admin("GET", "/v1/instances?tag=blue").json()["instances"]] == \
        ["i-admin-1"]
    patched = server.admin("PATCH", "/v1/instances/i-admin-1", {"hostname": "renamed"})
    assert patched.status == 200 and patched.json()["hostname"] == "renamed" and patched.json()["tags"] == {"blue": ""}
    assert server.admin("DELETE", "/v1/instances/i-admin-2").status == 204
    assert server.admin("GET", "/v1/instances/i-admin-2").status == 404
    assert server.admin("DELETE", "/v1/instances/i-admin-2").status == 404


def test_admin_changes_reach_the_metadata_api_at_once(server):
    address = new_address()
    server.add(instance_id="i-change", hostname="before", addresses=[address])
    assert server.get("/latest/meta-data/hostname", address).text == "before"
    server.admin("PATCH", "/v1/instances/i-change", {"hostname": "after"})
    assert server.get("/latest/meta-data/hostname", address).text == "after"
    server.admin("DELETE", "/v1/instances/i-change")
    assert server.get("/latest/meta-data/hostname", address).status == 404


@pytest.mark.parametrize("body, status, field", [
    ("{not json", 400, "(body)"),
    ("[1, 2]", 400, "(body)"),
    ({"hostname": "x"}, 400, "instance_id"),
    ({"instance_id": "i-bad", "addresses": [{"address": "10.0.0.999"}]}, 400, "addresses[0].address"),
    ({"instance_id": "i-bad", "user_data": "x" * 70000}, 400, "user_data"),
    ({"instance_id": "i-bad", "imds_tokens": "maybe"}, 400, "imds_tokens"),
    ({"instance_id": "i-bad", "surprise": 1}, 400, "surprise"),
    ({"instance_id": "i-bad", "ssh_keys": ["nope"]}, 400, "ssh_keys[0].data"),
])
def test_admin_bad_input_names_the_field(server, body, status, field):
    reply = server.admin("POST", "/v1/instances", body)
    assert reply.status == status and reply.json()["field"] == field, reply.text
    assert server.admin("GET", "/v1/instances/i-bad").status == 404  # nothing half-written


def test_admin_refusals(server):
    assert server.admin("GET", "/v1/instances", token=None).status == 401
    assert server.admin("GET", "/v1/instances", token="wrong-token-xxxxxxxx").status == 401
    huge = json.dumps({"instance_id": "i-huge", "meta": {"x": "y" * (1024 * 1024)}})
    reply = server.admin("POST", "/v1/instances", huge)
    assert reply.status == 413 and b"limit" in reply.body
    taken = new_address()
    server.add(instance_id="i-taken", addresses=[taken], hostname="taken")
    conflict = server.admin("POST", "/v1/instances", {"instance_id": "i-other", "addresses": [taken]})
    assert conflict.status == 409 and conflict.json()["field"] == "addresses[0].address"
    assert server.admin("POST", "/v1/instances", {"instance_id": "i-taken"}).status == 409
    assert server.admin("PUT", "/v1/instances/i-taken", {}).status == 405
    assert server.admin("GET", "/v1/instances?colour=red").json()["field"] == "colour"
    assert server.admin("PATCH", "/v1/instances/i-taken", {"instance_id": "i-new"}).json()["field"] == "instance_id"
    assert server.admin("GET", "/v2/things").status == 404


def test_openapi_metrics_health(server):
    doc = server.admin("GET", "/openapi.json", token=None).json()
    assert doc["openapi"].startswith("3.") and "/v1/instances/{instance_id}" in doc["paths"]
    assert "Instance" in doc["components"]["schemas"]
    health = server.admin("GET", "/health", token=None)
    assert health.status == 200 and health.json()["status"] == "ok"
    address = new_address()
    server.add(instance_id="i-metrics", hostname="m", addresses=[address])
    server.get("/latest/meta-data/instance-id", address)
    server.get("/latest/nope", address)
    metrics = server.admin("GET", "/metrics", token=None).text
    assert 'cloudseed_requests_total{api="ec2",status="200"}' in metrics
    assert 'cloudseed_requests_total{api="ec2",status="404"}' in metrics
    assert "cloudseed_request_duration_seconds_bucket" in metrics and "cloudseed_cached_instances" in metrics


def test_openapi_lists_every_admin_endpoint_and_each_answers_as_it_says(server):
    """Every operation of /openapi.json is called (path parameters from a registered instance and
    event, required query parameters and bodies from small examples; deletions last) and must
    answer one of the statuses it lists; the public ones without a token. Every endpoint family
    the admin listener serves must be in the document."""
    from cloudseed.provider.server.credentials import credential_keys_api

    doc = server.admin("GET", "/openapi.json", token=None).json()
    paths = doc["paths"]
    for path in (*credential_keys_api.PATHS, "/v1/instances", "/v1/instances/{instance_id}/events/{event_id}",
                 "/v1/provisioning", "/v1/instances/{instance_id}/provisioning",
                 "/v1/instances/{instance_id}/provisioning/stream", "/health", "/metrics"):
        assert path in paths, f"{path} is served but not in /openapi.json"
    server.add(instance_id="i-openapi", hostname="oa", addresses=[new_address()])
    event = server.admin("POST", "/v1/instances/i-openapi/events", {"kind": "reboot", "not_before": "+600"}).json()
    values = {"instance_id": "i-openapi", "event_id": event["event_id"]}
    bodies = {("/v1/instances", "post"): {"instance_id": "i-openapi-2", "hostname": "oa2"},
              ("/v1/instances/{instance_id}", "patch"): {"hostname": "oa-renamed"},
              ("/v1/instances/{instance_id}/events", "post"): {"kind": "freeze", "not_before": "+900"},
              ("/v1/instances/{instance_id}/events/{event_id}", "patch"): {"not_before": "+1200"}}
    operations = [(path, method, spec) for path, item in paths.items() for method, spec in item.items()
                  if method in ("get", "post", "patch", "delete")]
    operations.sort(key=lambda op: (op[1] == "delete", -op[0].count("/")))  # deletions last, events first
    for path, method, spec in operations:
        target = path.format(**values)
        query = [f"{p['name']}={p.get('example', 'not-a-token')}" for p in spec.get("parameters", [])
                 if p["in"] == "query" and (p.get("required") or "example" in p)]
        if query:
            target += "?" + "&".join(query)
        public = spec.get("security") == []
        reply = server.admin(method.upper(), target, bodies.get((path, method)),
                             token=None if public else ADMIN_TOKEN)
        assert str(reply.status) in spec["responses"], (method, target, reply.status, reply.text[:200])
        content = spec["responses"][str(reply.status)].get("content", {})
        if "application/json" in content:
            json.loads(reply.text)


def test_access_log_is_structured(server):
    address = new_address()
    server.add(instance_id="i-logged", hostname="l", addresses=[address])
    server.get("/openstack/latest/meta_data.json", address)
    deadline = time.monotonic() + 3
    entries: list = []
    while time.monotonic() < deadline:
        with open(server.access_log) as handle:
            entries = [json.loads(line) for line in handle if '"i-logged"' in line]
        if entries:
            break
        time.sleep(0.1)
    assert entries and entries[0]["path"] == "/openstack/latest/meta_data.json"
    assert entries[0]["status"] == 200 and entries[0]["src"] == address and entries[0]["ms"] >= 0


def test_second_server_sees_changes_within_a_second(server, db_url, tmp_path):
    other = ServerProcess(db_url, str(tmp_path / "second"), ["127.0.0.1:0"], config={"rate_limit": 0})
    try:
        address = new_address()
        server.add(instance_id="i-shared", hostname="one", addresses=[address])
        assert other.get("/latest/meta-data/hostname", address).text == "one"  # now cached there
        server.admin("PATCH", "/v1/instances/i-shared", {"hostname": "two"})
        changed = time.monotonic()
        while other.get("/latest/meta-data/hostname", address).text != "two":
            assert time.monotonic() - changed < 1.0, "second server still serves the old record"
            time.sleep(0.02)
    finally:
        assert other.stop() == 0


def test_rate_limit_answers_429(db_url, tmp_path):
    limited = ServerProcess(db_url, str(tmp_path / "limited"), ["127.0.0.1:0"],
                            config={"rate_limit": 1, "rate_burst": 5})
    try:
        address = new_address()
        limited.add(instance_id="i-limited", hostname="rl", addresses=[address])
        statuses = [limited.get("/latest/meta-data/instance-id", address).status for _ in range(8)]
        assert statuses[:5] == [200] * 5 and statuses[-1] == 429
        reply = limited.get("/latest/meta-data/instance-id", address)
        assert reply.headers["retry-after"] == "1" and "rate limit exceeded for " + address in reply.text
        assert limited.get("/latest/meta-data/instance-id", new_address()).status == 404  # others unaffected
    finally:
        limited.stop()


def test_graceful_shutdown_and_bad_config(db_url, tmp_path):
    proc = ServerProcess(db_url, str(tmp_path / "graceful"), ["127.0.0.1:0"])
    assert proc.stop(signal.SIGTERM) == 0 and "shutting down" in proc.log()
    bad = subprocess.run([sys.executable, "-m", "cloudseed", "serve", "--db", db_url, "--listen", "nonsense"],
                         cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "'nonsense' is not HOST:PORT" in bad.stderr
    config = tmp_path / "bad.yaml"
    config.write_text("listen: ['127.0.0.1:0']\ncolour: red\n")
    bad = subprocess.run([sys.executable, "-m", "cloudseed", "serve", "--config", str(config)],
                         cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "unknown setting 'colour'" in bad.stderr and str(config) in bad.stderr


def test_instances_command_line(tmp_path):
    db = str(tmp_path / "cli.db")
    key = tmp_path / "key.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 cli@example\n")
    user_data = tmp_path / "user-data"
    user_data.write_bytes(b"#cloud-config\nruncmd: [true]\n")

    def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db, *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=30, env=dict(os.environ))
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc

    cli("add", "--id", "i-cli", "--hostname", "cli-vm", "--address", "10.0.0.5/24@net-a", "--mac",
        "52:54:00:00:00:aa", "--ssh-key", str(key), "--user-data", str(user_data), "--imds-tokens", "required")
    shown = json.loads(cli("show", "i-cli").stdout)
    assert shown["addresses"] == [{"address": "10.0.0.5", "network": "net-a", "prefix": 24}]
    assert shown["user_data"] == "#cloud-config\nruncmd: [true]\n" and shown["imds_tokens"] == "required"
    assert shown["ssh_keys"][0]["data"].endswith("cli@example")
    assert "i-cli" in cli("list", "--network", "net-a").stdout
    assert "i-cli" not in cli("list", "--network", "net-b").stdout
    cli("update", "i-cli", "--hostname", "renamed", "--tag", "x")
    assert json.loads(cli("show", "i-cli").stdout)["hostname"] == "renamed"
    bad = cli("add", "--id", "i-bad", "--hostname", "ok", "--address", "10.0.0.300", check=False)
    assert bad.returncode == 2 and "10.0.0.300" in bad.stderr and "address" in bad.stderr
    missing = cli("add", "--id", "i-bad", "--user-data", str(tmp_path / "nope"), check=False)
    assert missing.returncode == 1 and "--user-data" in missing.stderr
    cli("rm", "i-cli")
    assert cli("show", "i-cli", check=False).returncode == 1
