"""Helpers the metadata-server tests import: a server subprocess, a raw HTTP client, fresh source addresses."""

from __future__ import annotations

import http.client as http_client
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PYTHON = sys.executable
ADMIN_TOKEN = "admin-token-0123456789"
PROXY_SECRET = "proxy-secret-0123456789"
_addresses = itertools.count(10)


class Reply:
    def __init__(self, status: int, headers: dict, body: bytes):
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        return self.body.decode()

    def json(self):
        return json.loads(self.body)


def http(port: int, path: str, method: str = "GET", source: str | None = None, headers: dict | None = None,
         body: bytes | str | None = None, host: str = "127.0.0.1") -> Reply:
    conn = http_client.HTTPConnection(host, port, timeout=10, source_address=(source, 0) if source else None)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        conn.close()


class ServerProcess:
    """A running ``cloudseed serve``; ``ports`` are the metadata listeners in --listen order."""

    def __init__(self, db_url: str, tmp: str, listen: list[str], config: dict | None = None,
                 extra: list[str] | None = None, netns: str | None = None, admin_listen: str = "127.0.0.1:0",
                 tree: str = ROOT):
        """``tree``: the source tree to run (an older release's, for upgrades)."""
        self.db_url = db_url
        self.tmp = tmp
        os.makedirs(tmp, exist_ok=True)
        self.access_log = os.path.join(tmp, "access.log")
        token_file = os.path.join(tmp, "admin-token")
        with open(token_file, "w") as handle:
            handle.write(ADMIN_TOKEN)
        args = [PYTHON, "-m", "cloudseed", "serve", "--db", db_url, "--admin-listen", admin_listen,
                "--admin-token-file", token_file, "--access-log", self.access_log]
        for spec in listen:
            args += ["--listen", spec]
        if config:
            import yaml

            path = os.path.join(tmp, "server.yaml")
            with open(path, "w") as handle:
                yaml.safe_dump(config, handle)
            args += ["--config", path]
        args += extra or []
        if netns:  # the server runs inside a network namespace; admin still on its loopback
            args = ["ip", "netns", "exec", netns] + args
        self.netns = netns
        self.stderr_path = os.path.join(tmp, "stderr")
        self.stderr = open(self.stderr_path, "w+")  # noqa: SIM115 - the child writes it until stop()
        env = dict(os.environ, PYTHONPATH=tree) if tree != ROOT else None
        self.proc = subprocess.Popen(args, cwd=tree, stdout=subprocess.DEVNULL, stderr=self.stderr, env=env)
        self.ports: list[int] = []
        self.admin_port = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = self.log()
            found = re.search(r"serving on (.*)", text)
            if found:
                for kind, port in re.findall(r"(metadata|admin) [^ ]+:(\d+)", found.group(1)):
                    if kind == "admin":
                        self.admin_port = int(port)
                    else:
                        self.ports.append(int(port))
                break
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        else:
            self.stop()
            raise AssertionError("server did not start:\n" + self.log())
        self.port = self.ports[0] if self.ports else 0

    def log(self) -> str:
        with open(self.stderr_path) as handle:
            return handle.read()

    def get(self, path: str, source: str, **kwargs) -> Reply:
        return http(self.port, path, source=source, **kwargs)

    def admin(self, method: str, path: str, body=None, token: str | None = ADMIN_TOKEN, headers=None) -> Reply:
        all_headers = {"Content-Type": "application/json"}
        if token:
            all_headers["Authorization"] = f"Bearer {token}"
        all_headers.update(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if self.netns:
            return self._admin_in_netns(method, path, all_headers, body)
        return http(self.admin_port, path, method, headers=all_headers, body=body)

    def _admin_in_netns(self, method: str, path: str, headers: dict, body) -> Reply:
        code = (f"import http.client,sys,json;c=http.client.HTTPConnection('127.0.0.1',{self.admin_port});"
                "a=json.loads(sys.stdin.read());c.request(a[0],a[1],body=a[3],headers=a[2]);"
                "r=c.getresponse();sys.stdout.write(json.dumps([r.status,r.read().decode()]))")
        proc = subprocess.run(["ip", "netns", "exec", self.netns, sys.executable, "-c", code],
                              input=json.dumps([method, path, headers, body]), capture_output=True, text=True,
                              timeout=30, check=True)
        status, text = json.loads(proc.stdout)
        return Reply(status, {}, text.encode())

    def add(self, **fields) -> dict:
        reply = self.admin("POST", "/v1/instances", fields)
        assert reply.status == 201, reply.text
        return reply.json()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()
        return self.proc.returncode


def new_address() -> str:
    """A loopback address no other test uses (127.1.x.y)."""
    n = next(_addresses)
    return f"127.1.{n // 250}.{n % 250 + 1}"


def rss_kib(pid: int) -> int:
    """Resident memory of process ``pid`` in KiB."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")
