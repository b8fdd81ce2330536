"""Akamai's (Linode's) metadata API from ``cloudseed serve`` on SQLite and PostgreSQL: the token
dance (``PUT /v1/token``, ``Metadata-Token``), ``/v1/instance``, ``/v1/network``, ``/v1/ssh-keys``
and base64 ``/v1/user-data``; ``/v1`` is Vultr's unless the record has ``clouds.akamai``.

No reference differential: Akamai's datasource is not in Debian's cloud-init 22.4 (added in
23.4); the shapes follow Akamai's published API reference.
"""

from __future__ import annotations

import base64

from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"


def register(server, **extra):
    address = new_address()
    v6 = "2600:3c05::" + address.split(".", 2)[2].replace(".", ":")
    fields = {"instance_id": "5" + "".join(f"{int(p):03d}" for p in address.split(".")[1:]), "hostname": "li-1",
              "availability_zone": "us-iad", "instance_type": "g6-standard-1",
              "addresses": [{"address": address, "network": "default", "mac": "f2:3c:00:00:00:01"},
                            {"address": v6, "network": "default", "prefix": 64}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA,
              "clouds": {"akamai": {"tags": ["web"]}}}
    fields.update(extra)
    server.add(**fields)
    return fields["instance_id"], address


def v6_of(address):
    import ipaddress

    return str(ipaddress.ip_address("2600:3c05::" + address.split(".", 2)[2].replace(".", ":")))


def token(server, address, expiry="300"):
    reply = server.get("/v1/token", address, method="PUT", headers={"Metadata-Token-Expiry-Seconds": expiry})
    assert reply.status == 200, reply.text
    return reply.text


def test_token_then_documents(server):
    instance_id, address = register(server)
    tok = token(server, address)
    doc = server.get("/v1/instance", address, headers={"Metadata-Token": tok, "Accept": "application/json"}).json()
    assert doc["id"] == int(instance_id) and doc["label"] == "li-1" and doc["region"] == "us-iad"
    assert doc["type"] == "g6-standard-1" and doc["tags"] == ["web"] and doc["specs"]["vcpus"] == 1
    text = server.get("/v1/instance", address, headers={"Metadata-Token": tok}).text
    assert f"id: {instance_id}\n" in text and "label: li-1\n" in text and "specs.vcpus: 1\n" in text
    net = server.get("/v1/network", address, headers={"Metadata-Token": tok, "Accept": "application/json"}).json()
    assert net["ipv6"]["slaac"] == f"{v6_of(address)}/64" and net["ipv4"]["private"] == [f"{address}/17"]
    keys = server.get("/v1/ssh-keys", address, headers={"Metadata-Token": tok, "Accept": "application/json"}).json()
    assert keys == {"users": {"root": [KEY]}}
    ud = server.get("/v1/user-data", address, headers={"Metadata-Token": tok})
    assert base64.b64decode(ud.body).decode() == USER_DATA
    as_json = server.get("/v1/token", address, method="PUT", headers={"Accept": "application/json"}).json()
    assert isinstance(as_json, list) and len(as_json) == 1


def test_tokens_are_required_checked_and_bound(server):
    _, address = register(server)
    _, other = register(server, hostname="li-2")
    missing = server.get("/v1/instance", address)
    assert missing.status == 401 and "PUT /v1/token" in missing.text
    assert server.get("/v1/instance", address, headers={"Metadata-Token": "forged.abc"}).status == 401
    stolen = server.get("/v1/instance", other, headers={"Metadata-Token": token(server, address)})
    assert stolen.status == 401 and "another instance" in stolen.text
    tok = token(server, address)
    assert server.get("/v1/user-data", address, headers={"Metadata-Token": tok}).status == 200
    # a cached answer is never served without the token
    assert server.get("/v1/user-data", address).status == 401
    for bad in ("0", "99999999", "x", "-5"):
        reply = server.get("/v1/token", address, method="PUT", headers={"Metadata-Token-Expiry-Seconds": bad})
        assert reply.status == 400 and "Metadata-Token-Expiry-Seconds" in reply.text
    assert server.get("/v1/token", address).status == 405
    assert server.get("/v1/instance", address, method="POST", headers={"Metadata-Token": tok}).status == 405
    assert server.get("/v1/nothing", address, headers={"Metadata-Token": tok}).status == 404


def test_no_user_data_is_empty_and_v1_is_vultr_without_akamai(server):
    _, address = register(server, user_data=None)
    assert server.get("/v1/user-data", address, headers={"Metadata-Token": token(server, address)}).body == b""
    _, plain = register(server, clouds={})
    assert server.get("/v1/token", plain, method="PUT").status != 200  # Vultr's tree has no token
