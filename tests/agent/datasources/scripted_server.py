"""A scripted HTTP server for hostile-input datasource tests (run in a NetLab cloud namespace).

``python scripted_server.py ADDRESS PORT SCRIPT_JSON``: SCRIPT maps a path (without query; ``*``
for any other) to ``{"status": int, "body": str, "headers": {...}}`` or ``{"action": "silent"}``
(accept, read the request, never answer) or ``{"action": "close"}`` (announce a long body, send a
few bytes, close). Each request is logged to stderr as ``METHOD PATH PEERPORT``. Prints ``ready``
once listening; stops after 120 s at the latest.
"""

from __future__ import annotations

import http.server
import json
import socketserver
import sys
import threading
import time


def main() -> None:
    address, port, script = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            path = self.path.split("?", 1)[0]
            sys.stderr.write(f"{self.command} {path} {self.client_address[1]}\n")
            sys.stderr.flush()
            rule = script.get(path, script.get("*", {"status": 404, "body": "not found"}))
            if rule.get("action") == "silent":
                time.sleep(60)
                return
            if rule.get("action") == "close":
                self.send_response(200)
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.write(b'{"id": "trunc')
                self.wfile.flush()
                self.close_connection = True
                return
            body = rule.get("body", "").encode()
            self.send_response(rule.get("status", 200))
            for key, value in rule.get("headers", {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = do_POST = _answer

        def log_message(self, *args) -> None:
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        if ":" in address:
            import socket

            address_family = socket.AF_INET6

    server = Server((address, port), Handler)
    threading.Timer(120, server.shutdown).start()
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
