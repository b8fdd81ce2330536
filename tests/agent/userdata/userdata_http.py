"""A real HTTP server on 127.0.0.1 for #include tests: serves a dict of path -> bytes.

``/slow/...`` answers after a delay (timeout tests); unknown paths are 404. Every request
is counted, so tests can check that ``#include-once`` fetched only once.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections import Counter


class IncludeServer:
    def __init__(self, files: dict[str, bytes], delay: float = 3.0):
        self.files = dict(files)
        self.hits: Counter[str] = Counter()
        self.delay = delay
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits[self.path] += 1
                if self.path.startswith("/slow/"):
                    time.sleep(outer.delay)
                body = outer.files.get(self.path.replace("/slow/", "/", 1))
                if body is None:
                    self.send_error(404, "not here")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> IncludeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
