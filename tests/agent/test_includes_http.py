"""``#include`` fetches go through the one HTTP client; ``#include-once`` is cached through the root.

Real HTTP servers on loopback (127.0.0.1 and 127.0.0.2 are different hosts to the client).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cloudseed.agent.userdata import process_userdata
from cloudseed.agent.userdata.includes import cache_file_name


class Server:
    """Serves ``files`` (path -> bytes); ``redirects`` (path -> URL) answer 302."""

    def __init__(self, host: str, files: dict[str, bytes], redirects: dict[str, str] | None = None):
        self.hits: Counter[str] = Counter()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                outer.hits[self.path] += 1
                if self.path in (redirects or {}):
                    self.send_response(302)
                    self.send_header("Location", redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    made = []

    def make(host, files, redirects=None):
        made.append(Server(host, files, redirects))
        return made[-1]

    yield make
    for server in made:
        server.close()


def test_redirect_to_another_host_is_refused(servers):
    other = servers("127.0.0.2", {"/cfg": b"#cloud-config\nfrom_other_host: 1\n"})
    first = servers("127.0.0.1", {"/same-target": b"#cloud-config\nsame_host: 1\n"},
                    redirects={"/away": f"{other.url}/cfg", "/same": "/same-target"})
    result = process_userdata(f"#include\n{first.url}/away\n{first.url}/same\n", fetch_retries=2)
    assert result.cloud_config == {"same_host": 1}  # a redirect on the same host is followed
    assert other.hits["/cfg"] == 0
    assert first.hits["/away"] == 1  # refused at once, never retried
    assert len(result.errors) == 1
    assert "refused redirect to another host" in result.errors[0] and "/away" in result.errors[0]


@pytest.fixture
def trickler():
    """Answers headers, then one byte of body every 0.2 s, for as long as the client listens."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve(conn):
        with conn:
            try:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n#cloud-config\n")
                while not stop.is_set():
                    conn.sendall(b"#")
                    time.sleep(0.2)
            except OSError:
                pass

    def accept():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()


def test_a_trickling_server_is_bounded_by_the_total_deadline(trickler):
    started = time.monotonic()
    result = process_userdata(f"#include {trickler}/slow\n", fetch_timeout=1.0, fetch_retries=1)
    elapsed = time.monotonic() - started
    # two attempts of at most 1 s each and one pause: never the 100 s the server would take
    assert elapsed < 4.0
    assert result.cloud_config is None
    assert "timed out" in result.errors[0] and "/slow" in result.errors[0]


def test_include_once_cache_is_written_0600_through_the_root(target, servers):
    from cloudseed.agent.boot.stages import Agent

    server = servers("127.0.0.1", {"/once": b"#cloud-config\nwrite_files: [{path: /etc/once, content: o}]\n"})
    url = f"{server.url}/once"
    root = target
    root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg",
               "network: {config: disabled}\ncloud_init_modules: [write_files]\n"
               "cloud_config_modules: []\ncloud_final_modules: []\n")
    root.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-once\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", f"#include-once {url}\n")
    for _boot in range(2):
        shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
        assert Agent(root).run_all() == 0
    assert root.read_text("/etc/once") == "o"
    assert server.hits["/once"] == 1  # the second boot used the cache
    directory = "/var/lib/cloudseed/instances/iid-once/include-once"
    entry = f"{directory}/{cache_file_name(url)}"
    assert stat.S_IMODE(root.stat(entry).st_mode) == 0o600
    assert stat.S_IMODE(root.stat(directory).st_mode) == 0o700
    assert root.read_bytes(entry).startswith(b"#cloud-config")
    assert [n for n in root.listdir(directory) if n.startswith(".")] == []  # no temporary file left
