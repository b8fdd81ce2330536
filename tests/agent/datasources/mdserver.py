"""A small, scriptable metadata server for datasource tests (honest and hostile behaviours).

``python mdserver.py --tree DIR --listen HOST:PORT [--listen ...] [--rules FILE]`` serves files
under DIR; a directory answers with an EC2-style listing (sub-directories end in "/", a file
``.listing`` overrides it). Rules (JSON: {path: rule}) script misbehaviour per path:
``{"status": 500, "times": 1}`` fails the first request(s), ``{"redirect": URL}``,
``{"slowloris": seconds}`` trickles a byte per second, ``{"huge": bytes}`` streams zeros without
storing them, ``{"content_type": ...}``, ``{"delay": seconds}``. With ``--imdsv2`` a token from
``PUT /latest/api/token`` is required on every GET (401 otherwise); ``--token-uses N`` makes
a token expire after N requests. Every request is appended to ``--log FILE`` as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_handler(args, rules: dict, state: dict):
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *a):  # quiet
            pass

        def _log(self, status: int) -> None:
            if args.log:
                with lock, open(args.log, "a") as f:
                    f.write(json.dumps({"method": self.command, "path": self.path, "status": status,
                                        "token": self.headers.get("X-aws-ec2-metadata-token"),
                                        "ttl": self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"),
                                        "host": self.headers.get("Host")}) + "\n")

        def _send(self, status: int, body: bytes, ctype: str = "text/plain") -> None:
            self._log(status)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PUT(self):
            if self.path == "/latest/api/token" and args.imdsv2:
                if args.imdsv2 == "forbidden":
                    return self._send(403, b"Forbidden")
                if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self._send(400, b"missing TTL")
                token = secrets.token_hex(8)
                with lock:
                    state["tokens"][token] = args.token_uses
                return self._send(200, token.encode())
            self._send(405 if self.path == "/latest/api/token" else 404, b"no")

        def do_GET(self):
            path = self.path.split("?")[0]
            if args.imdsv2:
                token = self.headers.get("X-aws-ec2-metadata-token", "")
                with lock:
                    uses = state["tokens"].get(token)
                    if uses is None or uses == 0:
                        ok = False
                    else:
                        ok = True
                        if uses > 0:
                            state["tokens"][token] = uses - 1
                if not ok:
                    return self._send(401, b"Unauthorized")
            rule = rules.get(path, {})
            if rule.get("delay"):
                time.sleep(rule["delay"])
            if "status" in rule:
                with lock:
                    seen = state["seen"].get(path, 0)
                    state["seen"][path] = seen + 1
                if seen < rule.get("times", 1 << 30):
                    return self._send(rule["status"], b"scripted failure")
            if "redirect" in rule:
                self._log(302)
                self.send_response(302)
                self.send_header("Location", rule["redirect"])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if "slowloris" in rule:
                self._log(200)
                self.wfile.write(b"HTTP/1.0 200 OK\r\n")
                end = time.monotonic() + rule["slowloris"]
                try:
                    while time.monotonic() < end:
                        self.wfile.write(b"X")
                        self.wfile.flush()
                        time.sleep(0.5)
                except OSError:
                    pass
                return
            if "huge" in rule:
                self._log(200)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if not rule.get("chunked_length_unknown"):
                    self.send_header("Content-Length", str(rule["huge"]))
                self.end_headers()
                block = b"0" * 65536
                sent = 0
                try:
                    while sent < rule["huge"]:
                        self.wfile.write(block)
                        sent += len(block)
                except OSError:
                    pass
                return
            full = os.path.join(args.tree, path.lstrip("/"))
            if os.path.isdir(full):
                listing = os.path.join(full, ".listing")
                if os.path.isfile(listing):
                    with open(listing, "rb") as f:
                        return self._send(200, f.read())
                names = sorted(n + ("/" if os.path.isdir(os.path.join(full, n)) else "")
                               for n in os.listdir(full) if not n.startswith("."))
                return self._send(200, "\n".join(names).encode())
            if os.path.isfile(full):
                with open(full, "rb") as f:
                    body = f.read()
                return self._send(200, body, rule.get("content_type", "text/plain"))
            self._send(404, b"Not Found")

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", required=True)
    parser.add_argument("--listen", action="append", required=True)
    parser.add_argument("--rules")
    parser.add_argument("--imdsv2", default="")
    parser.add_argument("--token-uses", type=int, default=-1)
    parser.add_argument("--log")
    args = parser.parse_args()
    rules = {}
    if args.rules:
        with open(args.rules) as f:
            rules = json.load(f)
    state = {"tokens": {}, "seen": {}}
    handler = make_handler(args, rules, state)
    servers = []
    for spec in args.listen:
        host, _, port = spec.rpartition(":")
        host = host.strip("[]")
        cls = type("S", (Server,), {"address_family": socket.AF_INET6 if ":" in host else socket.AF_INET})
        servers.append(cls((host, int(port)), handler))
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready " + " ".join(f"{s.server_address[0]}:{s.server_address[1]}" for s in servers), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
