"""The agent HTTP client against hostile servers on loopback: every case bounded and named in the log."""

from __future__ import annotations

import argparse
import logging
import socket
import threading
import time

import pytest

from cloudseed.core.http import FetchError, fetch, fetch_response, first_answer, request
from tests.agent.datasources.mdserver import Server, make_handler


@pytest.fixture
def serve(tmp_path):
    servers = []

    def start(rules=None, files=None, host="127.0.0.1", imdsv2="", token_uses=-1):
        tree = tmp_path / f"tree{len(servers)}"
        tree.mkdir()
        for name, content in (files or {}).items():
            path = tree / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        args = argparse.Namespace(tree=str(tree), imdsv2=imdsv2, token_uses=token_uses, log=None)
        cls = type("S", (Server,), {"address_family": socket.AF_INET6 if ":" in host else socket.AF_INET})
        server = cls((host, 0), make_handler(args, rules or {}, {"tokens": {}, "seen": {}}))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        port = server.server_address[1]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_plain_get(serve):
    base = serve(files={"a/b": "hello"})
    assert fetch(f"{base}/a/b") == b"hello"


def test_slow_loris_is_cut_at_the_total_deadline(serve, caplog):
    base = serve(rules={"/slow": {"slowloris": 30}})
    started = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(FetchError) as err:
        fetch(f"{base}/slow", timeout=1.5, retries=0)
    assert time.monotonic() - started < 3
    assert f"{base}/slow" in str(err.value) and "1.5s" in str(err.value)
    assert f"{base}/slow" in caplog.text


def test_one_gigabyte_body_is_refused_without_reading_it(serve):
    base = serve(rules={"/big": {"huge": 1 << 30}, "/big-unknown": {"huge": 1 << 30, "chunked_length_unknown": True}})
    started = time.monotonic()
    with pytest.raises(FetchError) as err:
        fetch(f"{base}/big", max_bytes=1024 * 1024)
    assert "larger than the limit" in str(err.value) and err.value.permanent
    # without a Content-Length the body is read only up to the limit
    with pytest.raises(FetchError) as err:
        fetch(f"{base}/big-unknown", max_bytes=1024 * 1024)
    assert "larger than the limit" in str(err.value)
    assert time.monotonic() - started < 5


def test_redirect_to_another_host_is_refused(serve):
    other = serve(files={"secret": "nope"})
    base = serve(rules={"/r": {"redirect": f"{other}/secret"}, "/local": {"redirect": "/ok"}}, files={"ok": "same"})
    with pytest.raises(FetchError) as err:
        fetch(f"{base}/r")
    assert "refused redirect to another host" in str(err.value) and other in str(err.value)
    assert fetch(f"{base}/local") == b"same"


def test_500_then_200_is_retried(serve, caplog):
    base = serve(rules={"/flaky": {"status": 500, "times": 2}}, files={"flaky": "finally"})
    with caplog.at_level(logging.INFO):
        assert fetch(f"{base}/flaky", retries=3, backoff=0.05) == b"finally"
    assert "HTTP 500" in caplog.text and "retrying" in caplog.text


def test_404_is_not_retried(serve):
    base = serve()
    started = time.monotonic()
    with pytest.raises(FetchError) as err:
        fetch(f"{base}/missing", retries=5, backoff=1)
    assert err.value.status == 404 and time.monotonic() - started < 0.5


def test_retries_stay_inside_the_total_budget(serve):
    base = serve(rules={"/down": {"status": 503}})
    started = time.monotonic()
    with pytest.raises(FetchError):
        fetch(f"{base}/down", retries=10, backoff=0.4, max_wait=1.0)
    assert time.monotonic() - started < 1.5


def test_connection_refused_is_named(caplog):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(FetchError) as err:
        request(f"http://127.0.0.1:{port}/x", timeout=1)
    assert "connection refused" in str(err.value) and f"127.0.0.1:{port}/x" in str(err.value)


def test_wrong_content_type_is_still_just_bytes(serve):
    base = serve(rules={"/u": {"content_type": "text/html"}}, files={"u": "#cloud-config\n"})
    resp = fetch_response(f"{base}/u")
    assert resp.content_type == "text/html" and resp.body == b"#cloud-config\n"


def test_first_answer_prefers_whoever_answers(serve):
    v6 = serve(host="::1", files={"x": "six"})
    # the IPv4 endpoint is a black hole: accepts nothing, never answers
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(0)
    blocker = socket.create_connection(hole.getsockname())  # fill the backlog
    try:
        started = time.monotonic()
        url, resp = first_answer([f"http://127.0.0.1:{hole.getsockname()[1]}/x", f"{v6}/x"],
                                 timeout=3, max_wait=3)
        assert url == f"{v6}/x" and resp.body == b"six"
        assert time.monotonic() - started < 1
    finally:
        blocker.close()
        hole.close()


def test_first_answer_gives_up_at_max_wait():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    started = time.monotonic()
    assert first_answer([f"http://127.0.0.1:{port}/"], max_wait=0.8) is None
    assert 0.7 < time.monotonic() - started < 1.3


def test_first_answer_accepts_a_final_refusal(serve):
    base = serve(imdsv2="forbidden")
    url, answer = first_answer([f"{base}/latest/api/token"], method="PUT",
                               headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"},
                               accept=lambda e: e.status == 403)
    assert isinstance(answer, FetchError) and answer.status == 403


def test_a_quick_refusal_does_not_beat_a_slightly_slower_success(serve):
    refuses = serve()  # 404 at once
    answers = serve(rules={"/t": {"delay": 0.2}}, files={"t": "token"})
    url, resp = first_answer([f"{refuses}/t", f"{answers}/t"], accept=lambda e: e.status == 404)
    assert url == f"{answers}/t" and resp.body == b"token"
    url, err = first_answer([f"{refuses}/t"], accept=lambda e: e.status == 404)
    assert isinstance(err, FetchError) and err.status == 404
