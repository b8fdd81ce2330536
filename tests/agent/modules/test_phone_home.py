"""phone_home: a real POST to a loopback HTTP server with the instance's id, names and host keys."""

from __future__ import annotations

import http.server
import socket
import threading
import urllib.parse

import pytest

from tests.agent.modules.module_support import run


class Recorder(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (the http.server hook)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.posts.append((self.path, self.headers.get("Content-Type"), urllib.parse.parse_qs(body.decode())))
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    httpd.posts, httpd.statuses = [], []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_posts_every_field_once_the_instance_is_up(target, server):
    target.write("/etc/hostname", "web1\n")
    target.write("/etc/ssh/ssh_host_ed25519_key.pub", "ssh-ed25519 AAAAC3Nza host\n")
    url = f"http://127.0.0.1:{server.server_port}/ready/$INSTANCE_ID"
    result, _ = run(target, "phone_home", {"phone_home": {"url": url}, "fqdn": "web1.example.org"}, stage="final")
    assert result.status == "ok", result.reason
    [(path, content_type, fields)] = server.posts
    assert path == "/ready/i-test" and content_type == "application/x-www-form-urlencoded"
    assert fields["instance_id"] == ["i-test"] and fields["hostname"] == ["web1"]
    assert fields["fqdn"] == ["web1.example.org"]
    assert fields["pub_key_ed25519"] == ["ssh-ed25519 AAAAC3Nza host"]
    assert fields["pub_key_rsa"] == ["N/A"]  # a key type the instance does not have


def test_only_the_listed_fields_and_retries_until_accepted(target, server):
    server.statuses = [503, 500]
    cfg = {"phone_home": {"url": f"http://127.0.0.1:{server.server_port}/", "post": ["instance_id"], "tries": 3}}
    result, _ = run(target, "phone_home", cfg, stage="final")
    assert result.status == "ok", result.reason
    assert len(server.posts) == 3 and all(fields == {"instance_id": ["i-test"]} for _, _, fields in server.posts)


def test_gives_up_after_its_tries(target):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = {"phone_home": {"url": f"http://127.0.0.1:{port}/", "tries": 2}}
    result, _ = run(target, "phone_home", cfg, stage="final")
    assert result.status == "failed" and result.reason.startswith("phone_home: giving up after 2 tries: ")


def test_missing_url_is_named(target):
    result, _ = run(target, "phone_home", {"phone_home": {"post": "all"}}, stage="final")
    assert result.status == "failed" and result.reason == "phone_home.url: missing"
