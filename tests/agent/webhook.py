"""A real webhook endpoint on loopback for the reporting tests: records what the agent posts."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Hook:
    """A real webhook endpoint on loopback: records each POST; ``delay`` seconds before answering."""

    def __init__(self, delay: float = 0.0, status: int = 200):
        received, hook = [], self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((dict(self.headers), json.loads(body)))
                time.sleep(hook.delay)
                self.send_response(hook.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.delay, self.status, self.received = delay, status, received
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/boot"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
