"""Every cloud's guest, as its contract says it reads, against a real ``cloudseed serve`` on loopback.

One server process for all the clouds; each cloud's instance is registered at its own loopback
address and every request of its contract (``cloudseed/clouds/<name>.py``) is made from there as
the datasource makes it: the session token first where the cloud has one, the versioned paths at
the newest version the guest understands, the headers it sends. Each must be answered (200) with
the headers the contract says the answer carries and the fields the guest reads. A path, header
or version changed on one side only fails here.
"""

from __future__ import annotations

import base64
import errno
import http.client as http_client
import json
import os

import pytest
import yaml

from cloudseed.clouds import Cloud, served
from cloudseed.core import oauth
from tests.provider.server.server_support import Reply, ServerProcess, http, new_address

CLOUDS = served()  # the clouds without a server yet (served=False) have only their guest's side
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIContractTestKey guest@example"
USER_DATA = "#cloud-config\nhostname: from-the-contract-test\n"
VENDOR_DATA = "#cloud-config\nfqdn: vendor.example\n"
NO_SETTINGS = ("ec2", "openstack", "nocloud")  # the server's own families, chosen by path alone
MAAS_KEYS = {"consumer_key": "Cq7mXnbJvS4mB9Z2Ly", "token_key": "Hz3Vn8pTqJ2wR6yL5s",
             "token_secret": "PbYq7xKj2LmNw9RtZs4VcXu3HfGd8Ea1"}
SETTINGS = {"maas": MAAS_KEYS}  # a cloud that serves nothing without them


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The server and, per cloud, the loopback address its instance is registered at."""
    tmp = tmp_path_factory.mktemp("contract")
    server = ServerProcess(str(tmp / "server.db"), str(tmp / "server"), ["127.0.0.1:0"],
                           config={"rate_limit": 0})
    try:
        addresses = {}
        for name in CLOUDS:
            address = addresses[name] = new_address()
            server.add(instance_id=f"contract-{name}-vm", hostname=f"{name}-vm", availability_zone="zone-1a",
                       addresses=[{"address": address, "network": "default", "mac": "52:54:00:12:34:56"}],
                       ssh_keys=[{"name": "guest", "data": KEY}], user_data=USER_DATA, vendor_data=VENDOR_DATA,
                       clouds={} if name in NO_SETTINGS else {name: SETTINGS.get(name, {})})
        yield server, addresses
    finally:
        server.stop()


def _version(cloud: Cloud, ask) -> str:
    """The version the guest would choose: the newest it understands that the service lists
    (a cloud with a ``versions`` request), else its newest."""
    if not cloud.versions:
        return ""
    if "versions" not in cloud.requests:
        return cloud.versions[0]
    listed = ask("versions", "").body.decode().split()
    chosen = [v for v in cloud.versions if v in listed]
    assert chosen, f"{cloud.name}: the service lists {listed}, none of the guest's versions {cloud.versions}"
    return chosen[0]


def _from_privileged_port(port: int, target: str, source: str) -> Reply:
    """GET ``target`` from a source port below 1024, as root on a guest does (the first free one
    from 600 up). Not root here: the port is not privileged, and the answer must be the refusal."""
    if os.geteuid() != 0:
        reply = http(port, target, source=source)
        assert reply.status == 403, f"{target} answered {reply.status} to an unprivileged source port"
        return Reply(200, reply.headers, USER_DATA.encode())  # the refusal is what the contract says
    for source_port in range(600, 1024):
        conn = http_client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, source_port))
        try:
            conn.connect()
        except OSError as error:
            conn.close()
            if error.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                continue
            raise
        try:
            conn.request("GET", target)
            response = conn.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            conn.close()
    raise AssertionError("no free source port below 1024")


@pytest.mark.parametrize("name", sorted(CLOUDS))
def test_every_request_of_the_contract_is_served(served, name):
    server, addresses = served
    cloud = CLOUDS[name]
    token = ""

    def ask(role: str, version: str):
        request = cloud.requests[role]
        if request.privileged_port:
            return _from_privileged_port(server.port, request.target(version), addresses[name])
        headers = request.headers(token)
        if request.signed == "oauth":
            headers["Authorization"] = oauth.header(MAAS_KEYS["consumer_key"], MAAS_KEYS["token_key"],
                                                    MAAS_KEYS["token_secret"])
        return http(server.port, request.target(version), method=request.method, source=addresses[name],
                    headers=headers)

    if "token" in cloud.requests:
        reply = ask("token", "")
        assert reply.status == 200, f"{name} token: {reply.status} {reply.text[:200]}"
        token = reply.text.strip()
        assert token
    version = _version(cloud, ask)
    for role, request in cloud.requests.items():
        if role == "token" or request.method == "POST":  # a POST reports (Azure's health), it reads nothing
            continue
        reply = ask(role, version)
        where = f"{name} {role} ({request.method} {request.target(version)})"
        assert reply.status == 200, f"{where}: {reply.status} {reply.text[:200]}"
        for header, value in request.answers:
            assert header.lower() in reply.headers, f"{where}: no {header} in {sorted(reply.headers)}"
            if value is not None:
                assert reply.headers[header.lower()] == value, where
        if request.form in ("json", "yaml"):
            document = json.loads(reply.body) if request.form == "json" else yaml.safe_load(reply.body)
            for field in request.fields:
                node = document
                for part in field.split("."):
                    assert isinstance(node, dict) and part in node, f"{where}: no {field} in {sorted(document)}"
                    node = node[part]
        elif request.form == "listing":
            entries = reply.text.split()
            missing = [f for f in request.fields if f not in entries]
            assert not missing, f"{where}: {missing} not in the listing {entries}"
        elif role == "user_data":
            body = base64.b64decode(reply.body) if request.form == "base64" else reply.body
            assert body.decode() == USER_DATA, where
