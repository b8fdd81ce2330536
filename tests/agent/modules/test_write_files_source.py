"""write_files ``source`` (cloud-init 24.3): content from a real loopback HTTP server or a file in the root.

The fetched bytes are written as they are; ``content`` is the fallback when the source fails (with a
warning), and an entry with neither is not written. ``file://`` stays inside the target root.
"""

from __future__ import annotations

import http.server
import os
import threading

import pytest

from tests.agent.modules.module_support import run


class Server:
    """Serves ``/conf`` (only with the right Authorization header), ``/big`` and 404 elsewhere."""

    def __init__(self):
        self.seen: list[dict] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append(dict(self.headers))
                if self.path == "/conf" and self.headers.get("Authorization") == "Bearer t0ken":
                    body = b"from the server\x00\xff"
                elif self.path == "/big":
                    body = b"x" * (65 * 1024 * 1024)
                else:
                    self.send_error(404 if self.path != "/conf" else 403)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except ConnectionError:
                    pass   # the client stops reading past its limit

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.close()


def test_source_is_fetched_with_its_headers_and_written_as_is(target, server):
    cfg = {"write_files": [{"path": "/etc/app/conf", "permissions": "0600", "encoding": "b64", "content": "Zm9v",
                            "source": {"uri": f"{server.url}/conf", "headers": {"Authorization": "Bearer t0ken"}}}]}
    result, ctx = run(target, "write_files", cfg, stage="init")
    assert result.status == "ok", result.reason
    # as is: the encoding belongs to content, not to what the source gave
    assert target.read_bytes("/etc/app/conf") == b"from the server\x00\xff"
    assert os.stat(target.path("/etc/app/conf")).st_mode & 0o777 == 0o600
    assert server.seen[0]["Authorization"] == "Bearer t0ken" and ctx.warnings == []


def test_a_failing_source_falls_back_to_content_with_a_warning(target, server):
    cfg = {"write_files": [{"path": "/etc/a", "content": "fallback\n", "source": {"uri": f"{server.url}/conf"}},
                           {"path": "/etc/b", "encoding": "b64", "content": "aGk=",
                            "source": {"uri": f"{server.url}/missing"}}]}
    result, ctx = run(target, "write_files", cfg, stage="init")
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/a") == "fallback\n" and target.read_text("/etc/b") == "hi"
    assert len(ctx.warnings) == 2
    assert "write_files[0] (/etc/a).source:" in ctx.warnings[0] and "HTTP 403" in ctx.warnings[0]
    assert "content was written instead" in ctx.warnings[1]


def test_without_content_a_failing_source_is_an_error_and_others_are_written(target, server):
    cfg = {"write_files": [{"path": "/etc/none", "source": {"uri": f"{server.url}/missing"}},
                           {"path": "/etc/ok", "content": "ok"}]}
    result, _ = run(target, "write_files", cfg, stage="init")
    assert result.status == "failed"
    assert "write_files[0] (/etc/none).source:" in result.reason and "no content to fall back to" in result.reason
    assert not target.exists("/etc/none") and target.read_text("/etc/ok") == "ok"


def test_a_source_larger_than_an_entry_may_be_is_refused(target, server):
    cfg = {"write_files": [{"path": "/etc/big", "content": "small", "source": {"uri": f"{server.url}/big"}}]}
    result, ctx = run(target, "write_files", cfg, stage="init")
    assert result.status == "ok" and target.read_text("/etc/big") == "small"
    assert "larger than the limit" in ctx.warnings[0]


def test_file_sources_stay_inside_the_root(target, tmp_path):
    outside = tmp_path / "host-secret"
    outside.write_text("host secret")
    target.write("/srv/template.conf", "inside the root\n")
    os.symlink(str(outside), target.path("/srv/link-out"))
    cfg = {"write_files": [
        {"path": "/etc/from-file", "source": {"uri": "file:///srv/template.conf"}},
        {"path": "/etc/from-path", "source": {"uri": "/srv/template.conf"}},
        {"path": "/etc/escape", "content": "kept", "source": {"uri": f"file://{outside}"}},
        {"path": "/etc/link", "content": "kept", "source": {"uri": "file:///srv/link-out"}},
        {"path": "/etc/device", "content": "kept", "source": {"uri": "file:///srv/fifo"}},
        {"path": "/etc/ftp", "content": "kept", "source": {"uri": "ftp://example.invalid/x"}},
    ]}
    os.mkfifo(target.path("/srv/fifo"))   # opening it would wait for a writer forever
    result, ctx = run(target, "write_files", cfg, stage="init")
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/from-file") == target.read_text("/etc/from-path") == "inside the root\n"
    for name in ("escape", "link", "device", "ftp"):
        assert target.read_text(f"/etc/{name}") == "kept", name
    assert b"host secret" not in b"".join(target.read_bytes(f"/etc/{n}") for n in ("escape", "link"))
    assert "unsupported scheme 'ftp'" in ctx.warnings[-1]


def test_source_in_the_schema():
    from cloudseed.agent.config.schema import validate_config

    good = {"write_files": [{"path": "/x", "source": {"uri": "https://example.com/x", "headers": {"A": "b"}}}]}
    assert [p for p in validate_config(good) if p.level == "error"] == []
    bad = {"write_files": [{"path": "/x", "source": {"headers": {"A": 1}}}]}
    assert sorted(p.path for p in validate_config(bad) if p.level == "error") == [
        "write_files[0].source", "write_files[0].source.headers.A"]
