"""Helpers of the configuration-management module tests (ansible, chef, mcollective, puppet, salt_minion).

``recorder`` puts a shell script in a ``shell_target`` root (busybox as /bin/sh) that appends its
name and arguments to /tmp/calls and then does what the test says (exit status, output): the
stand-in for a tool Debian's archive does not have (chef, salt) or that must not touch this
machine (apt-get, systemctl). ``serve`` is a real HTTP server on loopback with a random port;
``closed_port`` a port nothing listens on.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading


def recorder(root, name: str, body: str = "", status: int = 0, directory: str = "/usr/bin") -> None:
    """``directory/name``: records ``name args...`` in /tmp/calls, runs ``body``, exits ``status``."""
    root.makedirs(directory)
    root.makedirs("/tmp")
    script = f'#!/bin/sh\necho "{name} $*" >> /tmp/calls\n{body}\nexit {status}\n'
    root.write(f"{directory}/{name}", script, mode=0o755)


def calls(root) -> list[str]:
    return root.read_text("/tmp/calls", default="").splitlines()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(files: dict[str, bytes]):
    """Serve ``files`` (path -> body) on 127.0.0.1; yields the base URL and the list of paths asked."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the name http.server calls)
            asked.append(self.path)
            body = files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/x-shellscript")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # a client that hangs up early (a refused oversized body) is part of the tests

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def add_applets(root, *names: str) -> None:
    """More busybox applets in a ``shell_target`` root (chmod, sed, ...)."""
    import os

    for name in names:
        link = root.path(f"/bin/{name}")
        if not os.path.lexists(link):
            os.symlink("busybox", link)


def apt_recorder(root, failing: str = "") -> None:
    """A recording apt-get; installing ``failing`` fails the way apt-get says a package is unknown."""
    body = f'case " $* " in *" {failing} "*) echo "E: Unable to locate package {failing}" >&2; exit 100;; esac' \
        if failing else ""
    recorder(root, "apt-get", body)
