"""A CloudStack password is the password server's alone (SQLite and PostgreSQL, real servers on loopback).

Replays the adversarial run of issue 23: a CloudStack record's cleartext password was readable at
``GET /openstack/latest/password`` without ``DomU_Request`` and without being used up, and once the
guest had acknowledged it any process could ``POST`` a value of its choosing there, which
``send_my_password`` then served. The password server also ignored ``imds_tokens: required``.
Each test here failed before the fix.
"""

from __future__ import annotations

import re

import pytest

from tests.provider.server.server_support import ServerProcess, http, new_address

PASSWORD = "Operator-Set:pa55 word"


@pytest.fixture(scope="module")
def cs(db_url, tmp_path_factory):
    proc = ServerProcess(db_url, str(tmp_path_factory.mktemp("pw-server")), ["127.0.0.1:0"],
                         config={"rate_limit": 0, "password_server_listen": ["127.0.0.1:0"]})
    proc.password_port = int(re.search(r"password 127\.0\.0\.1:(\d+)", proc.log()).group(1))
    yield proc
    proc.stop()


def register(server, clouds=None, **extra) -> tuple[str, str]:
    address = new_address()
    instance_id = f"pw-{address.replace('.', '-')}"
    fields = {"instance_id": instance_id, "hostname": "pw-vm",
              "addresses": [{"address": address, "network": "default"}],
              "clouds": {"cloudstack": {}} if clouds is None else clouds}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address


def ask(server, address: str, request: str, headers: dict | None = None):
    return http(server.password_port, "/", source=address, headers={"DomU_Request": request, **(headers or {})})


def ec2_token(server, address: str, ttl: int = 60) -> str:
    reply = server.get("/latest/api/token", address, method="PUT",
                       headers={"X-aws-ec2-metadata-token-ttl-seconds": str(ttl)})
    assert reply.status == 200, reply.text
    return reply.text


@pytest.mark.parametrize("path", ["/openstack/latest/password", "/openstack/2013-04-04/password",
                                  "/openstack/2018-08-27/password/"])
def test_cloudstack_password_is_not_readable_through_openstack(cs, path):
    _, address = register(cs, password=PASSWORD)
    for method in ("GET", "HEAD"):
        reply = cs.get(path, address, method=method)
        assert reply.status == 404 and PASSWORD.encode() not in reply.body
    assert ask(cs, address, "send_my_password").text == PASSWORD  # the password server still has it, unused


@pytest.mark.parametrize("clouds", [{"cloudstack": {}}, {"exoscale": {}}])
def test_guest_cannot_post_a_password_the_password_server_serves(cs, clouds):
    instance_id, address = register(cs, clouds=clouds, password=PASSWORD)
    assert ask(cs, address, "send_my_password").text == PASSWORD
    assert ask(cs, address, "saved_password").text == "saved_password"  # acknowledged: forgotten
    posted = cs.get("/openstack/latest/password", address, method="POST", body="attacker-chosen")
    assert posted.status == 404
    assert ask(cs, address, "send_my_password").text == "saved_password"
    assert cs.admin("GET", f"/v1/instances/{instance_id}").json()["password_set"] is False


def test_a_password_the_guest_posted_earlier_is_never_served_as_the_operators(cs):
    # an OpenStack-style record: the guest posts its (encrypted) password, as nova's API allows
    instance_id, address = register(cs, clouds={})
    assert cs.get("/openstack/latest/password", address, method="POST", body="guest-written").status == 200
    assert cs.get("/openstack/latest/password", address).text == "guest-written"
    shown = cs.admin("GET", f"/v1/instances/{instance_id}").json()
    assert shown["password_set"] is True and shown["password_by"] == "guest"
    # the operator then names CloudStack: the guest's value must not become the password
    assert cs.admin("PATCH", f"/v1/instances/{instance_id}", {"clouds": {"cloudstack": {}}}).status == 200
    assert ask(cs, address, "send_my_password").text == "saved_password"
    # until the operator sets one
    assert cs.admin("PATCH", f"/v1/instances/{instance_id}", {"password": PASSWORD}).status == 200
    assert cs.admin("GET", f"/v1/instances/{instance_id}").json()["password_by"] == "operator"
    assert ask(cs, address, "send_my_password").text == PASSWORD


def test_imds_tokens_required_holds_on_the_password_server(cs):
    _, address = register(cs, password=PASSWORD, imds_tokens="required")
    refused = ask(cs, address, "send_my_password")
    assert refused.status == 401 and PASSWORD not in refused.text
    assert ask(cs, address, "saved_password").status == 401  # nor can it be used up without one
    token = ec2_token(cs, address)
    assert ask(cs, address, "send_my_password", {"X-aws-ec2-metadata-token": token}).text == PASSWORD
    assert ask(cs, address, "send_my_password", {"X-aws-ec2-metadata-token": "garbage.0"}).status == 401
    _, other = register(cs, password="someone-else")
    stolen = ask(cs, address, "send_my_password", {"X-aws-ec2-metadata-token": ec2_token(cs, other)})
    assert stolen.status == 401 and "another instance" in stolen.text
    assert ask(cs, address, "send_my_password", {"X-aws-ec2-metadata-token": token}).text == PASSWORD


def test_server_wide_required_holds_on_the_password_server(db_url, tmp_path):
    proc = ServerProcess(db_url, str(tmp_path / "srv"), ["127.0.0.1:0"],
                         config={"rate_limit": 0, "imds_tokens": "required",
                                 "password_server_listen": ["127.0.0.1:0"]})
    try:
        proc.password_port = int(re.search(r"password 127\.0\.0\.1:(\d+)", proc.log()).group(1))
        _, address = register(proc, password=PASSWORD)  # the record itself says optional
        assert ask(proc, address, "send_my_password").status == 401
        token = ec2_token(proc, address)
        assert ask(proc, address, "send_my_password", {"X-aws-ec2-metadata-token": token}).text == PASSWORD
    finally:
        proc.stop()
