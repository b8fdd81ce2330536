"""A loopback HTTP server for a datasource's bad-input tests: one body, answered well or badly.

``HostileServer(body, mode, path=None)``: every GET (or only ``path``; others 404) is answered
with ``body``; ``mode`` is ``ok``, ``silent`` (accept and never answer) or ``cut`` (announce the
whole body, send half, close). ``base`` is its URL, ``hits`` how often it was asked.
"""

from __future__ import annotations

import http.server
import socket
import threading
import time


class HostileServer:
    def __init__(self, body: bytes, mode: str = "ok", path: str | None = None):
        outer = self
        self.body, self.mode, self.hits = body, mode, 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.hits += 1
                if outer.mode == "silent":
                    time.sleep(20)
                    return
                if path is not None and self.path != path:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body[:len(outer.body) // 2] if outer.mode == "cut" else outer.body)
                if outer.mode == "cut":
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
