"""Metadata hosts on a serial line, for the SmartOS and CloudSigma datasource tests.

``Pty``: a pseudo-terminal (``os.openpty``) in raw mode; the guest side (``Pty.path``, the slave)
is what the datasource opens as its ``serial_device``, the host side is answered by a responder
thread. ``JoyentResponder`` speaks the Joyent metadata protocol V2 as a SmartOS host does (a bare
newline -> ``invalid command``, ``NEGOTIATE V2`` -> ``V2_OK``, ``GET``/``KEYS`` frames with CRC32);
``serve_joyent_socket`` answers the same on an LX-brand zone's Unix socket. ``CepkoResponder``
answers CloudSigma's server context requests (``<\\n<key>\\n>`` -> one line of JSON ended by EOT).
Each responder has ``mode`` for bad hosts: ``silent`` (never answers), ``garbage`` (a line of noise
before each answer), ``crc`` (a wrong checksum), ``truncate`` (half an answer, then nothing), ``close`` (half an
answer, then the connection closes: for sockets).
``reference_env()``: the environment running Debian's cloud-init 22.4 with its ``python3-serial``
dependency (fetched as the reference is, with ``apt-get download``, into the same cache).
"""

from __future__ import annotations

import base64
import binascii
import functools
import glob
import json
import os
import re
import select
import socket
import subprocess
import tempfile
import threading
import tty

import pytest

from tests.reference import CACHE, SYSTEM_PYTHON, _env


def crc(body: str) -> str:
    return f"{binascii.crc32(body.encode()) & 0xFFFFFFFF:08x}"


class Pty:
    """A raw pseudo-terminal: ``path`` for the guest, ``master`` for the responder."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        self.path = os.ttyname(self.slave)

    def close(self) -> None:
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


class _Responder:
    """A thread answering requests read from ``fd`` (a pty master or a connected socket)."""

    def __init__(self, fd: int, mode: str = "ok"):
        self.fd, self.mode = fd, mode
        self.requests: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        buf = b""
        while not self.stop.is_set():
            try:
                readable, _, _ = select.select([self.fd], [], [], 0.05)
                if not readable:
                    continue
                chunk = os.read(self.fd, 65536)
            except OSError:  # the pty or socket is gone
                return
            if not chunk:
                return
            buf += chunk
            buf = self.consume(buf)

    def send(self, data: bytes) -> None:
        try:
            os.write(self.fd, data)
        except OSError:
            pass

    def consume(self, buf: bytes) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)


class JoyentResponder(_Responder):
    """A SmartOS metadata host: ``data`` maps SmartOS keys to values."""

    frame = re.compile(r"V2 (\d+) ([0-9a-f]{8}) (([0-9a-f]+) (\w+)( (\S+))?)$")

    def __init__(self, fd: int, data: dict[str, str], mode: str = "ok", noise: bytes = b""):
        self.data = data
        if noise:  # stale output waiting on the line before the guest opens it
            os.write(fd, noise)
        super().__init__(fd, mode)

    def answer(self, line: str) -> str | None:
        if line == "":
            return "invalid command"
        if line == "NEGOTIATE V2":
            return "V2_OK"
        found = self.frame.match(line)
        if not found:
            return "invalid command"
        length, checksum, body, rid, rtype, _, param = found.groups()
        if int(length) != len(body) or checksum != crc(body):
            return "FAILURE"
        if rtype == "GET":
            key = base64.b64decode(param or "").decode()
            self.requests.append(key)
            value = self.data.get(key)
            reply = f"{rid} NOTFOUND" if value is None else \
                f"{rid} SUCCESS {base64.b64encode(value.encode()).decode()}"
        elif rtype == "KEYS":
            self.requests.append("KEYS")
            reply = f"{rid} SUCCESS {base64.b64encode(chr(10).join(self.data).encode()).decode()}"
        else:
            reply = f"{rid} FAILURE"
        sum_ = "00000000" if self.mode == "crc" and "SUCCESS" in reply else crc(reply)
        return f"V2 {len(reply)} {sum_} {reply}"

    def consume(self, buf: bytes) -> bytes:
        while b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
            line = raw.decode("ascii", "replace")
            if self.mode == "silent":
                self.requests.append(line)
                continue
            reply = self.answer(line)
            if reply is None:
                continue
            if self.mode == "garbage" and line.startswith("V2 "):
                self.send(b"\x1b[0mlogin: ## console noise ##\n")
            if self.mode in ("truncate", "close") and line.startswith("V2 "):
                self.send(reply[: len(reply) // 2].encode())
                if self.mode == "close":  # a socket closing mid-reply
                    self.stop.set()
                    os.close(self.fd)
                    return b""
                self.mode = "silent"
                continue
            self.send(reply.encode() + b"\n")
        return buf


def serve_joyent_socket(path: str, data: dict[str, str], mode: str = "ok") -> tuple[socket.socket, list]:
    """An LX-brand zone's metadata socket at ``path``: each connection gets a JoyentResponder."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    server.bind(path)
    server.listen(4)
    responders: list[JoyentResponder] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            responders.append(JoyentResponder(conn.detach(), data, mode))

    threading.Thread(target=accept, daemon=True).start()
    return server, responders


class CepkoResponder(_Responder):
    """A CloudSigma host: ``context`` is the server context; ``<\\n\\n>`` answers all of it,
    ``<\\n/meta/key\\n>`` one part. ``eot``: what ends an answer."""

    def __init__(self, fd: int, context: dict, mode: str = "ok", eot: bytes = b"\x04\n"):
        self.context, self.eot = context, eot
        super().__init__(fd, mode)

    def lookup(self, key: str) -> object:
        value: object = self.context
        for part in [p for p in key.split("/") if p]:
            value = value.get(part) if isinstance(value, dict) else None
        return value

    def consume(self, buf: bytes) -> bytes:
        while b">" in buf:
            raw, buf = buf.split(b">", 1)
            key = raw.decode("ascii", "replace").strip("<\n")
            self.requests.append(key)
            if self.mode == "silent":
                continue
            value = self.lookup(key)
            text = json.dumps(value) if not isinstance(value, str) else value
            if self.mode == "garbage":
                self.send(b"{not json at all\x04\n")
                continue
            if self.mode == "truncate":
                self.send(text[: len(text) // 2].encode())
                self.mode = "silent"
                continue
            self.send(text.encode() + self.eot)
        return buf


@functools.cache
def pyserial_tree() -> str | None:
    """Debian's python3-serial unpacked into the cache (cloud-init 22.4's SmartOS and CloudSigma need it)."""
    target = os.path.join(CACHE, "python3-serial")
    marker = os.path.join(target, "usr", "lib", "python3", "dist-packages", "serial", "__init__.py")
    if os.path.exists(marker):
        return os.path.dirname(os.path.dirname(marker))
    os.makedirs(CACHE, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        os.chmod(tmp, 0o755)
        fetched = subprocess.run(["apt-get", "download", "python3-serial"], cwd=tmp, capture_output=True, text=True)
        debs = glob.glob(os.path.join(tmp, "python3-serial_*.deb"))
        if fetched.returncode != 0 or not debs:
            return None
        subprocess.run(["dpkg", "-x", debs[0], target], check=True)
    return os.path.dirname(os.path.dirname(marker))


def reference_env() -> dict[str, str]:
    env = _env()
    tree = pyserial_tree()
    if tree is None:
        pytest.skip("Debian's python3-serial could not be fetched (apt-get download python3-serial)")
    env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + tree
    return env


REFERENCE_PRELUDE = """
import json, sys
from cloudinit import distros, dmi, helpers
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
distro = distros.fetch("debian")("debian", {}, paths)
def fake_dmi(product):
    dmi.read_dmi_data = lambda key: product if key == "system-product-name" else None
def report(src, ok):
    ud = src.userdata_raw
    vd = src.vendordata_raw
    print(json.dumps({"ok": ok, "metadata": src.metadata,
                      "userdata": ud.decode() if isinstance(ud, bytes) else ud,
                      "vendordata": vd.decode() if isinstance(vd, bytes) else vd,
                      "network_config": src.network_config if ok else None,
                      "keys": src.get_public_ssh_keys() if ok else None,
                      "instance_id": src.get_instance_id() if ok else None,
                      "hostname": src.get_hostname().hostname if ok else None,
                      "availability_zone": src.availability_zone if ok else None}, default=str))
"""


def run_reference(code: str, tmp: str, *args: str, timeout: float = 60) -> dict:
    """Run ``code`` (after REFERENCE_PRELUDE) with Debian's python3 and cloud-init 22.4 (``sys.argv[1]`` is
    ``tmp``, then ``args``); what its ``report`` printed last."""
    proc = subprocess.run([SYSTEM_PYTHON, "-c", REFERENCE_PRELUDE + code, tmp, *args], env=reference_env(),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise AssertionError(f"reference failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
