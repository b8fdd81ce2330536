"""The cached hot path answers exactly like the first, uncached request.

Answers are remembered per instance and request path, request heads per their bytes and
checked IMDSv2 tokens per token; these tests repeat requests on one keep-alive connection so the
second and later ones take those shortcuts, and check they still honour tokens, HEAD, fresh
random seeds and registry changes.
"""

from __future__ import annotations

import base64
import http.client as http_client
import json
import time

from tests.provider.server.server_support import new_address


def _connection(server, source: str) -> http_client.HTTPConnection:
    return http_client.HTTPConnection("127.0.0.1", server.port, timeout=10, source_address=(source, 0))


def _get(conn: http_client.HTTPConnection, path: str, method: str = "GET", headers: dict | None = None):
    conn.request(method, path, headers=headers or {})
    reply = conn.getresponse()
    return reply.status, dict(reply.getheaders()), reply.read()


def test_repeated_requests_on_one_connection(server):
    address = new_address()
    server.add(instance_id="i-hot-1", hostname="hot1", addresses=[{"address": address, "network": "n"}],
               ssh_keys=[{"name": "k", "data": "ssh-ed25519 AAAA hot"}])
    conn = _connection(server, address)
    try:
        seeds = set()
        for _ in range(3):
            status, headers, body = _get(conn, "/openstack/latest/meta_data.json")
            assert status == 200 and int(headers["Content-Length"]) == len(body)
            meta = json.loads(body)
            assert meta["hostname"] == "hot1" and len(base64.b64decode(meta["random_seed"])) == 512
            seeds.add(meta["random_seed"])
            length = len(body)
            status, headers, body = _get(conn, "/openstack/latest/meta_data.json", "HEAD")
            assert status == 200 and body == b"" and int(headers["Content-Length"]) == length
            assert _get(conn, "/latest/meta-data/hostname")[2] == b"hot1"
            assert _get(conn, "/latest/meta-data/nothing-here")[0] == 404
            assert _get(conn, "/latest/meta-data/hostname", "POST")[0] == 405
        assert len(seeds) == 3  # a fresh seed every time, cached or not
        assert server.admin("PATCH", "/v1/instances/i-hot-1", {"hostname": "hot1b"}).status == 200
        deadline = time.monotonic() + 5
        while _get(conn, "/latest/meta-data/hostname")[2] != b"hot1b":
            assert time.monotonic() < deadline, "the cached answer outlived the registry change"
            time.sleep(0.05)
        assert json.loads(_get(conn, "/openstack/latest/meta_data.json")[2])["hostname"] == "hot1b"
    finally:
        conn.close()


def test_remembered_tokens_are_still_bound_to_their_instance(server):
    first, second = new_address(), new_address()
    server.add(instance_id="i-hot-2", hostname="hot2", addresses=[{"address": first, "network": "n"}],
               imds_tokens="required")
    server.add(instance_id="i-hot-3", hostname="hot3", addresses=[{"address": second, "network": "n"}])
    conn = _connection(server, first)
    try:
        status, _, token = _get(conn, "/latest/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
        assert status == 200
        for _ in range(3):  # checked once, then remembered
            assert _get(conn, "/latest/meta-data/hostname", headers={"X-aws-ec2-metadata-token": token.decode()}) \
                [2] == b"hot2"
        assert _get(conn, "/latest/meta-data/hostname")[0] == 401  # required, cached route or not
        forged = token.decode()[:-1] + ("1" if token.decode()[-1] == "0" else "0")
        assert _get(conn, "/latest/meta-data/hostname", headers={"X-aws-ec2-metadata-token": forged})[0] == 401
    finally:
        conn.close()
    other = server.get("/latest/meta-data/hostname", second, headers={"X-aws-ec2-metadata-token": token.decode()})
    assert other.status == 401 and "another instance" in other.text
