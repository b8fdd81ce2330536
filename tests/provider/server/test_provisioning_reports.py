"""Provisioning reports through a real server: an instance posts its events, the admin API and the
fleet pages read them (SQLite and PostgreSQL, the ``server`` fixture)."""

from __future__ import annotations

import json
import threading
import time

from cloudseed.provider.server.provisioning_api import PATH
from tests.provider.server.server_support import ADMIN_TOKEN, http, new_address


def event(kind, name, ts, result=None, description="", **extra):
    out = {"event_type": kind, "name": name, "description": description or name, "origin": "cloudinit",
           "timestamp": ts, **extra}
    if kind == "finish":
        out.update(result=result or "SUCCESS", duration=0.25)
    return out


def post(server, source, body, headers=None):
    return http(server.port, PATH, "POST", source=source, body=json.dumps(body),
                headers={"Content-Type": "application/json", **(headers or {})})


def new_instance(server, **fields):
    address = new_address()
    iid = f"i-prov-{address.replace('.', '-')}"
    server.add(instance_id=iid, addresses=[address], **fields)
    return iid, address


def test_an_instance_reports_its_boot_and_the_admin_api_shows_state_and_timeline(server):
    iid, address = new_instance(server)
    assert server.admin("GET", f"/v1/instances/{iid}/provisioning").json()["provisioning"]["state"] == "pending"
    t = time.time()
    batch = [event("start", "init-local", t, boot_id="b-1"),
             event("finish", "init-local", t + 0.4, datasource="NoCloud", boot_id="b-1")]
    reply = post(server, address, {"events": batch})
    assert reply.status == 200 and reply.json()["state"] == "provisioning", reply.text
    # one bare event, as cloud-init's own webhook handler posts them
    assert post(server, address, event("start", "modules-final", t + 1)).status == 200
    assert post(server, address, event("finish", "modules-final", t + 2)).json()["state"] == "done"
    shown = server.admin("GET", f"/v1/instances/{iid}/provisioning").json()
    assert shown["provisioning"]["state"] == "done" and shown["provisioning"]["datasource"] == "NoCloud"
    assert [r["name"] for r in shown["reports"]] == ["init-local", "init-local", "modules-final", "modules-final"]
    assert set(shown["provisioning"]["times"]) == {"pending", "provisioning", "done"}
    fleet = server.admin("GET", "/v1/provisioning?state=done").json()["instances"]
    assert iid in [e["instance_id"] for e in fleet]
    # the instance may read its own state, never anyone else's
    own = http(server.port, "/cloudseed/v1/provisioning", source=address).json()
    assert own["state"] == "done"


def test_reports_are_identified_bounded_and_refused_with_reasons(server):
    iid, address = new_instance(server)
    stranger = new_address()
    assert post(server, stranger, event("start", "init-local", 1.0)).status == 404  # nobody's address
    bad = post(server, address, {"events": [event("start", "x", 1.0), {"event_type": "finish", "name": "y",
                                                                        "timestamp": "soon"}]})
    assert bad.status == 400 and bad.json()["field"] == "events[1].timestamp"
    big = post(server, address, [event("start", "x" * 100, 1.0, description="d" * 2000)] * 40)
    assert big.status == 413
    assert http(server.port, PATH, "GET", source=address).status == 405
    form = http(server.port, PATH, "POST", source=address, body="a=b",
                headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status == 400


def test_tokens_required_holds_for_reports(server):
    iid, address = new_instance(server, imds_tokens="required")
    assert post(server, address, event("start", "init-local", 1.0)).status == 401
    token = http(server.port, "/latest/api/token", "PUT", source=address,
                 headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}).text
    assert post(server, address, event("start", "init-local", 1.0),
                {"X-aws-ec2-metadata-token": token}).status == 200


def test_the_rate_of_reports_is_bounded_per_instance(server):
    _, address = new_instance(server)
    statuses = [post(server, address, [event("start", f"modules-config/config-m{i}-{j}", 1.0)
                                       for j in range(200)]).status for i in range(6)]
    assert statuses[:5] == [200] * 5 and statuses[5] == 429  # a burst of 1000, then 50 a second


def test_the_stream_sends_a_report_as_soon_as_it_is_stored(server):
    iid, address = new_instance(server)
    got: dict = {}

    def watch():
        started = time.monotonic()
        reply = server.admin("GET", f"/v1/instances/{iid}/provisioning/stream?wait=10")
        got.update(reply=reply, seconds=time.monotonic() - started)

    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(0.5)
    posted = time.monotonic()
    post(server, address, [event("start", "modules-final", 5.0),
                           event("finish", "modules-final/config-scripts_user", 6.0, "FAIL", "runcmd exited 3")])
    watcher.join(15)
    reply = got["reply"]
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/event-stream")
    text = reply.text
    assert "event: report" in text and "runcmd exited 3" in text and "retry: 250" in text
    state = json.loads(text.split("event: state\ndata: ")[1].split("\n")[0])
    assert state["state"] == "failed" and state["failure"]["name"] == "modules-final/config-scripts_user"
    assert got["seconds"] - 0.5 < 1.0 + (time.monotonic() - posted)  # within the poll, not the 10 s wait
    last = int([line for line in text.splitlines() if line.startswith("id: ")][-1][4:])
    quiet = server.admin("GET", f"/v1/instances/{iid}/provisioning/stream?wait=1",
                         headers={"Last-Event-ID": str(last)})
    assert "event: report" not in quiet.text and "event: state" in quiet.text


def test_fleet_pages_need_the_token_and_escape_what_instances_say(server):
    iid, address = new_instance(server, name="<b>web</b>", hostname="web-1")
    hostile = '<script>alert(1)</script><img src=x onerror=alert(2)>'
    post(server, address, [event("start", "init-network", 1.0),
                           event("finish", "init-network/config-" + hostile, 2.0, "FAIL", hostile)])
    anonymous = http(server.admin_port, "/fleet")
    assert anonymous.status == 303 and anonymous.headers["location"] == "/fleet/login"
    assert http(server.admin_port, f"/v1/instances/{iid}/provisioning").status == 401
    wrong = http(server.admin_port, "/fleet/login", "POST", body="token=nope",
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert wrong.status == 401 and "set-cookie" not in wrong.headers
    login = http(server.admin_port, "/fleet/login", "POST", body=f"token={ADMIN_TOKEN}",
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert login.status == 303
    cookie = login.headers["set-cookie"].split(";")[0]
    assert ADMIN_TOKEN not in cookie and "HttpOnly" in login.headers["set-cookie"]
    page = http(server.admin_port, f"/fleet/instances/{iid}", headers={"Cookie": cookie})
    assert page.status == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "<script>alert" not in page.text and "<img src=x" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    fleet = http(server.admin_port, "/fleet?state=failed", headers={"Cookie": cookie})
    assert iid in fleet.text and "<b>web</b>" not in fleet.text and "&lt;b&gt;web&lt;/b&gt;" in fleet.text
    # the cookie reads; it never writes
    assert http(server.admin_port, f"/v1/instances/{iid}", "DELETE", headers={"Cookie": cookie}).status == 401
    assert http(server.admin_port, "/fleet/static/fleet.js").status == 200
