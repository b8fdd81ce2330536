"""A multi-host metadata deployment in network namespaces, for the tests: deploy/ as documented.

Every namespace is this run's own, so the addresses are those of docs/metadata-server.md
("Deployment") and deploy/*: haproxy.cfg, cloudseed-hop-limit.lua/.nft, cloudseed-balancer.conf and
serve.yaml run as shipped (only haproxy's two site paths and each server's host number and
database differ).

    gA, gB (10.50.0.11, .12)   guests, one instance each (reference clients, the agent)
    gS (10.50.0.13)            storm guests: every address of 10.60.0.0/16 is local there
    rtr (10.50.0.2) -- far     a guest two hops away (10.51.0.5): the IMDSv2 hop limit
      |  bridge 10.50.0.0/16
    bal   haproxy on 169.254.169.254:80; 10.40.N.1 on its link to server N; forwards packets
    sN    cloudseed serve: PROXY listener 10.40.N.2:80, admin 10.40.N.2:8775; 10.30.0.1N on the
          database LAN
    db    PostgreSQL on 10.30.0.1:5432 (bridge 10.30.0.0/24)

The test process reaches any namespace from a thread that has entered it (``Namespace``):
sockets made there belong to that namespace whichever thread uses them.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import itertools
import os
import re
import signal
import socket
import subprocess
import time
from typing import Iterator

from cloudseed.provider.server.engine.proxy_protocol import encode_v2
from tests.provider.registry.pg_cluster import PgCluster
from tests.provider.server.server_support import ADMIN_TOKEN, ROOT, Reply, ServerProcess

DEPLOY = os.path.join(ROOT, "deploy")
CLONE_NEWNET = 0x40000000
METADATA = "169.254.169.254"
STORM_BLOCK = "10.60.0.0/16"
_RUNS = itertools.count(1)


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


@contextlib.contextmanager
def running(tmp: str, servers: int = 3) -> Iterator[Deployment]:
    """A Deployment with every server started and UP in haproxy; torn down after (skips without root)."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    deployment = Deployment(tmp, servers)
    try:
        for n in range(1, servers + 1):
            deployment.start_server(n, wait=False)
        deployment.wait_states({f"s{n}": "UP" for n in range(1, servers + 1)})
        yield deployment
    finally:
        deployment.close()


def storm_address(n: int) -> str:
    """The n-th storm guest's address (n from 0), in STORM_BLOCK."""
    return f"10.60.{n // 250}.{n % 250 + 1}"


class Namespace:
    """A network namespace and a thread inside it (``call`` runs a function there)."""

    def __init__(self, name: str):
        self.name = name
        ip("netns", "add", name)
        self.pool = concurrent.futures.ThreadPoolExecutor(1, initializer=self._enter, initargs=(name,))
        self.exec("ip", "link", "set", "lo", "up")

    @staticmethod
    def _enter(name: str) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {name}")
        finally:
            os.close(fd)

    def call(self, function, *args, **kwargs):
        return self.pool.submit(function, *args, **kwargs).result()

    def exec(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        proc = subprocess.run(["ip", "netns", "exec", self.name, *args], capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} in {self.name}: {proc.stderr.strip()}")
        return proc

    def connect(self, address: str, port: int, source: str | None = None, timeout: float = 10) -> socket.socket:
        """A TCP connection made in this namespace (from ``source`` when given)."""
        def make() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            if source:
                sock.bind((source, 0))
            sock.connect((address, port))
            return sock
        return self.call(make)

    def close(self) -> None:
        self.pool.shutdown(wait=False)
        ip("netns", "del", self.name, check=False)


def exchange(sock: socket.socket, data: bytes) -> Reply:
    """Send one request on ``sock`` and read its answer (Content-Length framed, or to EOF)."""
    with sock:
        sock.sendall(data)
        received = b""
        while True:
            head_end = received.find(b"\r\n\r\n")
            if head_end >= 0:
                length = None
                for line in received[:head_end].split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if length is not None and len(received) >= head_end + 4 + length:
                    break
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                chunk = b""
            if not chunk:
                break
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return Reply(status, headers, body)


def request(method: str, path: str, headers: dict | None = None, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {METADATA}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Deployment:
    """haproxy, ``servers`` ``cloudseed serve`` hosts and PostgreSQL, each in its namespace."""

    def __init__(self, tmp: str, servers: int = 3, server_config: dict | None = None):
        self.tmp = tmp
        os.makedirs(tmp, exist_ok=True)
        self.tag = f"mh{os.getpid() % 100000}x{next(_RUNS)}"
        self.namespaces: dict[str, Namespace] = {}
        self.servers: dict[int, ServerProcess | None] = {}
        self.count = servers
        self.server_config = server_config or {}
        self.haproxy: subprocess.Popen | None = None
        self.pg: PgCluster | None = None
        try:
            self._wire()
            self.pg = PgCluster.start(netns=self.ns("db").name, listen="10.30.0.1")
            self.database = self.pg.new_database().split("@/", 1)[1].split("?")[0]
            self.url = self.pg.url(self.database)  # the test's own way in: the unix socket
            self._start_haproxy()
        except BaseException:
            self.close()
            raise

    # -- the network ------------------------------------------------------------------------
    def ns(self, key: str) -> Namespace:
        return self.namespaces[key]

    def _add(self, key: str) -> Namespace:
        self.namespaces[key] = Namespace(f"{self.tag}{key}")
        return self.namespaces[key]

    def _veth(self, left: Namespace, left_name: str, right: Namespace, right_name: str) -> None:
        ip("link", "add", left_name, "netns", left.name, "type", "veth", "peer", "name", right_name,
           "netns", right.name)
        left.exec("ip", "link", "set", left_name, "up")
        right.exec("ip", "link", "set", right_name, "up")

    def _wire(self) -> None:
        bal, db = self._add("bal"), self._add("db")
        bal.exec("ip", "link", "add", "br0", "type", "bridge")
        bal.exec("ip", "addr", "add", "10.50.0.1/16", "dev", "br0")
        bal.exec("ip", "link", "set", "br0", "up")
        bal.exec("ip", "addr", "add", f"{METADATA}/32", "dev", "lo")
        bal.exec("sysctl", "-qw", "net.ipv4.ip_forward=1")
        for key, address in (("gA", "10.50.0.11"), ("gB", "10.50.0.12"), ("gS", "10.50.0.13"), ("rtr", "10.50.0.2")):
            guest = self._add(key)
            self._veth(bal, f"v{key}", guest, "eth0")
            bal.exec("ip", "link", "set", f"v{key}", "master", "br0")
            guest.exec("ip", "addr", "add", f"{address}/16", "dev", "eth0")
            guest.exec("ip", "route", "add", "default", "via", "10.50.0.1")
        gS = self.ns("gS")
        gS.exec("ip", "route", "add", "local", STORM_BLOCK, "dev", "lo")
        bal.exec("ip", "route", "add", STORM_BLOCK, "via", "10.50.0.13")
        rtr, far = self.ns("rtr"), self._add("far")
        self._veth(rtr, "eth1", far, "eth0")
        rtr.exec("ip", "addr", "add", "10.51.0.1/24", "dev", "eth1")
        rtr.exec("sysctl", "-qw", "net.ipv4.ip_forward=1")
        far.exec("ip", "addr", "add", "10.51.0.5/24", "dev", "eth0")
        far.exec("ip", "route", "add", "default", "via", "10.51.0.1")
        bal.exec("ip", "route", "add", "10.51.0.0/24", "via", "10.50.0.2")
        db.exec("ip", "link", "add", "br0", "type", "bridge")
        db.exec("ip", "addr", "add", "10.30.0.1/24", "dev", "br0")
        db.exec("ip", "link", "set", "br0", "up")
        for n in range(1, self.count + 1):
            host = self._add(f"s{n}")
            self._veth(bal, f"s{n}", host, "eth0")
            bal.exec("ip", "addr", "add", f"10.40.{n}.1/24", "dev", f"s{n}")
            host.exec("ip", "addr", "add", f"10.40.{n}.2/24", "dev", "eth0")
            host.exec("ip", "route", "add", "default", "via", f"10.40.{n}.1")
            self._veth(db, f"s{n}", host, "db0")
            db.exec("ip", "link", "set", f"s{n}", "master", "br0")
            host.exec("ip", "addr", "add", f"10.30.0.{10 + n}/24", "dev", "db0")
        bal.exec("nft", "-f", os.path.join(DEPLOY, "cloudseed-hop-limit.nft"))
        bal.exec("sysctl", "-q", "-p", os.path.join(DEPLOY, "cloudseed-balancer.conf"))

    def cut_database(self, n: int, cut: bool = True) -> None:
        """Take server ``n``'s link to the database LAN down (or up again)."""
        self.ns(f"s{n}").exec("ip", "link", "set", "db0", "down" if cut else "up")

    # -- haproxy ------------------------------------------------------------------------------
    def _start_haproxy(self) -> None:
        with open(os.path.join(DEPLOY, "haproxy.cfg")) as handle:
            config = handle.read()
        self.haproxy_socket = os.path.join(self.tmp, "haproxy.sock")
        config = config.replace("/run/haproxy/cloudseed.sock", self.haproxy_socket)
        config = config.replace("/etc/haproxy/cloudseed-hop-limit.lua", os.path.join(DEPLOY, "cloudseed-hop-limit.lua"))
        path = os.path.join(self.tmp, "haproxy.cfg")
        with open(path, "w") as handle:
            handle.write(config)
        self.haproxy_log = open(os.path.join(self.tmp, "haproxy.log"), "w")  # noqa: SIM115 - until close()
        self.haproxy = subprocess.Popen(["ip", "netns", "exec", self.ns("bal").name, "haproxy", "-db", "-f", path],
                                        stdout=self.haproxy_log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.haproxy_socket):
            if self.haproxy.poll() is not None or time.monotonic() > deadline:
                with open(self.haproxy_log.name) as handle:
                    raise AssertionError(f"haproxy did not start:\n{handle.read()}")
            time.sleep(0.05)

    def haproxy_command(self, command: str) -> str:
        """A command on haproxy's runtime API (stats socket)."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(self.haproxy_socket)
            sock.sendall(command.encode() + b"\n")
            return b"".join(iter(lambda: sock.recv(65536), b"")).decode()

    def server_states(self, backend: str = "cloudseed") -> dict[str, str]:
        """haproxy's view: server name -> UP, DOWN, MAINT..."""
        states = {}
        for line in self.haproxy_command("show stat").splitlines():
            fields = line.split(",")
            if len(fields) > 17 and fields[0] == backend and fields[1] not in ("BACKEND", "FRONTEND"):
                states[fields[1]] = fields[17]
        return states

    def wait_states(self, expected: dict[str, str], backend: str = "cloudseed", timeout: float = 20) -> float:
        """Wait until haproxy sees ``expected`` (e.g. {"s2": "DOWN"}); the seconds it took."""
        started = time.monotonic()
        while True:
            states = self.server_states(backend)
            if all(states.get(name, "").startswith(state) for name, state in expected.items()):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise AssertionError(f"haproxy {backend}: {states}, expected {expected}")
            time.sleep(0.1)

    # -- the servers ---------------------------------------------------------------------------
    def server_settings(self, n: int) -> dict:
        """deploy/serve.yaml for host ``n`` on this run's database (and ``server_config`` on top)."""
        import yaml

        with open(os.path.join(DEPLOY, "serve.yaml")) as handle:
            text = handle.read().replace("10.40.1.", f"10.40.{n}.")
        settings = yaml.safe_load(text)
        settings["db"] = self.pg.tcp_url(self.database)
        for key in ("admin_token_file", "access_log", "admin_listen"):  # ServerProcess's own
            settings.pop(key)
        settings.update(self.server_config)
        return settings

    def start_server(self, n: int, tree: str = ROOT, wait: bool = True) -> ServerProcess:
        settings = self.server_settings(n)
        proc = ServerProcess(settings.pop("db"), os.path.join(self.tmp, f"s{n}-{time.monotonic_ns()}"), [],
                             config=settings, netns=self.ns(f"s{n}").name, admin_listen=f"10.40.{n}.2:8775",
                             tree=tree)
        self.servers[n] = proc
        if wait:
            self.wait_states({f"s{n}": "UP"})
        return proc

    def kill_server(self, n: int, sig: int = signal.SIGKILL) -> None:
        """Kill server ``n``'s process (``ip netns exec`` execs it, so the pid is the server's)."""
        proc = self.servers[n]
        if proc is not None:
            proc.stop(sig)
        self.servers[n] = None

    def admin(self, n: int, method: str, path: str, body: dict | None = None) -> Reply:
        """Server ``n``'s admin API (reached from the balancer's namespace, as haproxy does)."""
        import json

        data = json.dumps(body).encode() if body is not None else b""
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
        return exchange(self.ns("bal").connect(f"10.40.{n}.2", 8775),
                        request(method, path, headers, data).replace(f"Host: {METADATA}".encode(), b"Host: admin"))

    def direct(self, n: int, source: str, data: bytes) -> Reply:
        """``data`` to server ``n``'s PROXY listener from the balancer, naming ``source`` (PROXY v2)."""
        sock = self.ns("bal").connect(f"10.40.{n}.2", 80)
        return exchange(sock, encode_v2(source, 40000, METADATA, 80) + data)

    def guest(self, key: str, data: bytes, source: str | None = None, address: str = METADATA,
              port: int = 80) -> Reply:
        """``data`` from guest namespace ``key`` (from ``source``, e.g. a storm address in gS)."""
        return exchange(self.ns(key).connect(address, port, source), data)

    def metric(self, n: int, name: str) -> float:
        text = self.admin(n, "GET", "/metrics").text
        found = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
        return float(found.group(1)) if found else 0.0

    # -- teardown ------------------------------------------------------------------------------
    def close(self) -> None:
        for n in list(self.servers):
            if self.servers[n] is not None:
                self.servers[n].stop()
        if self.haproxy is not None and self.haproxy.poll() is None:
            self.haproxy.terminate()
            try:
                self.haproxy.wait(10)
            except subprocess.TimeoutExpired:
                self.haproxy.kill()
                self.haproxy.wait()
        if self.pg is not None:
            self.pg.stop()
        for namespace in self.namespaces.values():
            namespace.close()
        if getattr(self, "haproxy_log", None) is not None:
            self.haproxy_log.close()
