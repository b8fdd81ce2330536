"""A man in the middle for signed user-data tests: a transparent HTTP proxy in the guest namespace that
changes the user-data on its way and lets its signature (``PATH.sig``) through untouched.

Run in the guest namespace as ``tamper_proxy.py PORT MARK WORD CHANGED USER_DATA``; an nftables rule
(``redirect``, output hook) sends the guest's connections to the metadata addresses to PORT on
this namespace's loopback, except the proxy's own (its sockets carry firewall mark MARK). Each
request goes to its original destination (``SO_ORIGINAL_DST``) from the guest's own address, with a
privileged source port when the client used one (Scaleway serves user-data only to those), so the
server sees the same instance; the answer comes back with WORD replaced by CHANGED (the same length;
raw, in JSON or YAML) and the base64 of the user-data (the file USER_DATA) by that of the changed
user-data. Prints ``ready``, then one line per answer it changed: ``changed PATH``.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import socket
import struct
import sys

SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
SO_MARK = 36


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mark = 0
    swaps: list[tuple[bytes, bytes]] = []

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _upstream(self) -> socket.socket:
        raw = self.connection.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
        port, address = struct.unpack(">H", raw[2:4])[0], socket.inet_ntoa(raw[4:8])
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, SO_MARK, self.mark)
        if self.client_address[1] < 1024:  # keep a privileged source port privileged
            for candidate in range(600, 1024):
                try:
                    sock.bind(("0.0.0.0", candidate))
                    break
                except OSError:
                    continue
        sock.settimeout(20)
        sock.connect((address, port))
        return sock

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        lines = [f"{self.command} {self.path} HTTP/1.1"]
        lines += [f"{k}: {v}" for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")]
        lines.append("Connection: close")
        sock = self._upstream()
        try:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            answer = http.client.HTTPResponse(sock, method=self.command)
            answer.begin()
            data = answer.read()
            headers = [(k, v) for k, v in answer.getheaders()
                       if k.lower() not in ("content-length", "transfer-encoding", "connection")]
            status, reason = answer.status, answer.reason
        finally:
            sock.close()
        if not self.path.split("?", 1)[0].endswith(".sig"):
            changed = data
            for before, after in self.swaps:
                changed = changed.replace(before, after)
            if changed != data:
                print(f"changed {self.path}", flush=True)
                data = changed
        self.send_response(status, reason)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.close_connection = True

    do_GET = do_PUT = do_POST = do_HEAD = _forward


def main() -> None:
    port, mark, word, changed, user_data_file = sys.argv[1:6]
    assert len(word) == len(changed)
    with open(user_data_file, "rb") as f:
        user_data = f.read()
    before, after = word.encode(), changed.encode()
    Proxy.mark = int(mark, 0)
    Proxy.swaps = [(base64.b64encode(user_data), base64.b64encode(user_data.replace(before, after))),
                   (before, after)]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Proxy)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
