"""The LXD datasource against a devlxd API server of our own on a real Unix socket.

The server (threaded, in this file) answers HTTP on ``/dev/lxd/sock`` inside a temporary target
root as LXD's devlxd does: ``/1.0/meta-data`` (YAML), ``/1.0/config`` (a JSON list of routes),
``/1.0/config/<key>`` (the raw value), ``/1.0/devices``. The agent's local stage provisions the
root from it; a socket that closes mid-reply or never answers costs a bounded wait and a clear
error. cloud-init 22.4's own ``DataSourceLXD`` reads the same socket for the differential test.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
import time

import pytest

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.datasources import NETWORK as NETWORK_STAGE
from cloudseed.agent.datasources.lxd import LXD, DevLXDError, crawl
from cloudseed.agent.state import Paths

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDvVFenV4n3KLcbe42bjG/VeA8aGFXsM+fbfMA9qFdrd lxd@example"
META = "#cloud-config\ninstance-id: c1-lxd\nlocal-hostname: c1\n"
USER_DATA = ("#cloud-config\nwrite_files:\n  - {path: /etc/from-lxd, content: seen}\n"
             f"ssh_authorized_keys: ['{KEY}']\n")
NETWORK = "version: 2\nethernets:\n  eth0:\n    addresses: [10.20.0.5/24]\n    gateway4: 10.20.0.1\n"
CONFIG = {
    "cloud-init.user-data": USER_DATA,
    "cloud-init.network-config": NETWORK,
    "cloud-init.vendor-data": "#cloud-config\nvendor_seen: true\n",
    "user.user-data": "#cloud-config\nold: user-key\n",  # older key: loses to cloud-init.*
    "user.meta-data": "secret: meta\n",
    "user.role": "web",
}
DEVICES = {"eth0": {"type": "nic", "network": "lxdbr0", "name": "eth0"}, "root": {"type": "disk", "path": "/"}}


class DevLXD:
    """A devlxd server on ``path``; ``mode`` "ok", "truncate" (closes mid-reply), "silent"."""

    def __init__(self, path: str, config: dict[str, str] | None = None, meta: str = META, mode: str = "ok"):
        self.config = CONFIG if config is None else config
        self.meta, self.mode, self.requests = meta, mode, []
        self.stop = threading.Event()
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(8192).decode()
                while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                    pass
                route = line.split()[1] if len(line.split()) > 1 else ""
                server.requests.append(route)
                if server.mode == "silent":
                    server.stop.wait(30)
                    return
                status, body = server.answer(route)
                head = (f"HTTP/1.0 {status} X\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n").encode()
                if server.mode == "truncate":
                    self.wfile.write(head + body[: len(body) // 2])
                    return
                self.wfile.write(head + body)

        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.server = socketserver.ThreadingUnixStreamServer(path, Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, route: str) -> tuple[int, bytes]:
        if route == "/1.0/meta-data":
            return 200, self.meta.encode()
        if route == "/1.0/config":
            return 200, json.dumps([f"/1.0/config/{k}" for k in self.config]).encode()
        if route.startswith("/1.0/config/") and route[len("/1.0/config/"):] in self.config:
            return 200, self.config[route[len("/1.0/config/"):]].encode()
        if route == "/1.0/devices":
            return 200, json.dumps(DEVICES).encode()
        return 404, b'{"error": "not found"}'

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def devlxd(target):
    servers = []

    def start(**kw) -> DevLXD:
        server = DevLXD(target.path_nofollow("/dev/lxd/sock"), **kw)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def context(target, stage=LOCAL, cfg=None) -> DatasourceContext:
    return DatasourceContext(root=target, cfg=cfg or {}, cmdline="", paths=Paths(target), stage=stage)


def test_detected_only_by_the_socket(target, devlxd):
    assert LXD.why(context(target)) is None
    os.makedirs(target.path("/dev/lxd"))
    with open(target.path("/dev/lxd/sock"), "w"):
        pass  # a regular file is not the socket
    assert LXD.why(context(target)) is None
    os.unlink(target.path("/dev/lxd/sock"))
    devlxd()
    assert LXD.why(context(target)) == "socket /dev/lxd/sock"


def test_an_lxd_vm_waits_for_the_socket_in_the_network_stage(target, devlxd):
    target.write("/sys/class/dmi/id/board_name", "LXD\n")
    assert "board_name" in LXD.why(context(target))
    start = time.monotonic()
    assert find_datasource(context(target), ["LXD"]).datasource is None  # local stage: no wait
    assert time.monotonic() - start < 0.5
    cfg = {"datasource": {"LXD": {"socket_wait": 0.5}}}
    assert find_datasource(context(target, stage=NETWORK_STAGE, cfg=cfg), ["LXD"]).datasource is None
    timer = threading.Timer(0.5, devlxd)  # lxd-agent starts a moment later
    timer.start()
    ds = find_datasource(context(target, stage=NETWORK_STAGE), ["LXD"]).datasource
    timer.join()
    assert ds is not None and ds.instance_id == "c1-lxd"


def test_no_socket_costs_nothing(target):
    start = time.monotonic()
    search = find_datasource(context(target), ["LXD"])
    assert search.tried == [] and search.datasource is None
    assert time.monotonic() - start < 0.5


def test_crawl_prefers_cloud_init_keys_and_keeps_the_rest(target, devlxd):
    server = devlxd()
    ds = find_datasource(context(target), ["LXD"]).datasource
    assert ds is not None and ds.name == "LXD"
    assert ds.instance_id == "c1-lxd" and ds.local_hostname == "c1"
    assert ds.userdata_raw == USER_DATA.encode()
    assert ds.vendordata_raw == b"#cloud-config\nvendor_seen: true\n"
    assert ds.network_config == {"version": 2, "ethernets": {"eth0": {"addresses": ["10.20.0.5/24"],
                                                                       "gateway4": "10.20.0.1"}}}
    assert ds.raw["config"] == {"cloud-init.network-config": NETWORK, "user.role": "web"}
    assert ds.extra["config"]["user.meta-data"] == "secret: meta\n"
    assert ds.raw["devices"] == DEVICES and ds.raw["_metadata_api_version"] == "1.0"
    assert "/1.0/config/user.role" in server.requests


def test_user_keys_are_the_fallback(target, devlxd):
    devlxd(config={"user.user-data": "#cloud-config\nold: 1\n", "user.network-config": NETWORK})
    ds = find_datasource(context(target), ["LXD"]).datasource
    assert ds.userdata_raw == b"#cloud-config\nold: 1\n"
    assert ds.network_config["ethernets"]["eth0"]["addresses"] == ["10.20.0.5/24"]
    assert ds.vendordata_raw is None


def test_agent_provisions_a_root(target, devlxd):
    devlxd()
    target.write("/etc/cloudseed/cloud.cfg.d/90-test.cfg",
                 "datasource_list: [LXD, None]\n"
                 "cloud_init_modules: [write_files, set_hostname]\ncloud_config_modules: []\n"
                 "cloud_final_modules: []\n")
    target.write("/usr/lib/systemd/systemd-networkd", "#!/bin/sh\n", mode=0o755)
    from cloudseed.agent.boot.stages import Agent

    agent = Agent(target)
    assert agent.run_local() == 0
    assert agent.run_network() == 0
    data = json.loads(target.read_text("/run/cloudseed/instance-data.json"))
    v1 = data["v1"]
    assert (v1["cloud_name"], v1["platform"], v1["instance_id"], v1["local_hostname"]) == \
        ("lxd", "lxd", "c1-lxd", "c1")
    assert v1["subplatform"] == "LXD socket API v. 1.0 (/dev/lxd/sock)"
    assert data["ds"]["config"]["user.role"] == "web"
    assert "user.meta-data" not in json.dumps(data["ds"])  # user and vendor keys are private
    assert target.read_text("/etc/hostname").strip() == "c1"
    assert target.read_text("/etc/from-lxd") == "seen"
    rendered = "".join(target.read_text(f"/etc/systemd/network/{f}")
                       for f in target.listdir("/etc/systemd/network"))
    assert "10.20.0.5/24" in rendered and "10.20.0.1" in rendered


@pytest.mark.parametrize("mode,message", [("truncate", "closed mid-reply"), ("silent", "no complete answer")])
def test_a_bad_socket_is_bounded(target, devlxd, mode, message):
    devlxd(mode=mode)
    start = time.monotonic()
    with pytest.raises(DevLXDError, match=message):
        crawl(target.path_nofollow("/dev/lxd/sock"), timeout=1.0, max_wait=2.0)
    assert time.monotonic() - start < 2.5
    search = find_datasource(context(target, cfg={"datasource": {"LXD": {"timeout": 1, "max_wait": 2}}}), ["LXD"])
    assert search.datasource is None and search.tried == ["LXD"]
    assert message in search.errors[0] and "/1.0/meta-data" in search.errors[0]


def test_a_socket_that_closes_without_a_reply(target):
    path = target.path_nofollow("/dev/lxd/sock")
    os.makedirs(os.path.dirname(path))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)

    def accept_and_close() -> None:
        conn, _ = listener.accept()
        conn.recv(1024)
        conn.close()

    threading.Thread(target=accept_and_close, daemon=True).start()
    try:
        with pytest.raises(DevLXDError, match="closed before the reply headers"):
            crawl(path, timeout=2, max_wait=2)
    finally:
        listener.close()


def test_bad_meta_data_is_a_clear_error(target, devlxd):
    devlxd(meta="instance-id: [unclosed\n")
    search = find_datasource(context(target), ["LXD"])
    assert search.datasource is None and "meta-data" in search.errors[0]


REFERENCE = r"""
import json, sys
from cloudinit.sources import DataSourceLXD as m
m.LXD_SOCKET_PATH = sys.argv[1]
m.find_fallback_nic = lambda: "eth0"
md = m.read_metadata()
from cloudinit import helpers, distros
ds = m.DataSourceLXD.__new__(m.DataSourceLXD)
ds._crawled_metadata = md
ds._network_config = m.sources.UNSET
ds.metadata = m._raw_instance_data_to_dict("meta-data", md.get("meta-data"))
if "network-config" in md:
    ds._network_config = m._raw_instance_data_to_dict("network-config", md["network-config"])
print(json.dumps({"md": md, "metadata": ds.metadata, "network": ds.network_config}))
"""


def test_same_data_as_cloud_init(target, devlxd):
    from tests.reference import reference_python

    devlxd()
    path = target.path_nofollow("/dev/lxd/sock")
    ref = json.loads(reference_python(REFERENCE, path).stdout)
    ours = crawl(path)
    # the same crawl: meta-data, config, aliases, devices
    assert ours == ref["md"]
    ds = find_datasource(context(target), ["LXD"]).datasource
    assert ds.metadata == ref["metadata"]
    assert ds.network_config == ref["network"]
    assert ds.userdata_raw.decode() == ref["md"]["user-data"]
    assert ds.vendordata_raw.decode() == ref["md"]["vendor-data"]


def test_same_fallback_choice_as_cloud_init_without_network_config(target, devlxd):
    """Without network-config, cloud-init writes DHCP on its fallback NIC; we leave network_config
    unset and the agent's own fallback (DHCP on the likely NIC) applies: a named difference."""
    from tests.reference import reference_python

    devlxd(config={"cloud-init.user-data": USER_DATA})
    ref = json.loads(reference_python(REFERENCE, target.path_nofollow("/dev/lxd/sock")).stdout)
    assert ref["network"]["config"][0]["subnets"] == [{"type": "dhcp", "control": "auto"}]
    ds = find_datasource(context(target), ["LXD"]).datasource
    assert ds.network_config is None


def test_both_generators_enable_the_agent_on_the_socket(tmp_path):
    import subprocess

    from tests.agent.datasources.cloudlab import CLOUDSEED, GENERATOR

    for kind in ("shell", "python"):
        for with_socket in (True, False):
            root = tmp_path / f"{kind}-{with_socket}"
            (root / "etc").mkdir(parents=True)
            listener = None
            if with_socket:
                (root / "dev/lxd").mkdir(parents=True)
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(str(root / "dev/lxd/sock"))
            out = str(tmp_path / f"out-{kind}-{with_socket}")
            try:
                if kind == "shell":
                    env = {"CLOUDSEED_ROOT": str(root), "CLOUDSEED_BIN": CLOUDSEED, "PATH": os.environ["PATH"]}
                    argv = ["/bin/sh", GENERATOR, out]
                else:
                    env, argv = None, [CLOUDSEED, "--root", str(root), "generator", out]
                proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
            finally:
                if listener is not None:
                    listener.close()
            assert proc.returncode == 0, proc.stderr
            enabled = root / "run/cloudseed/enabled"
            if with_socket:
                assert "LXD (socket /dev/lxd/sock)" in enabled.read_text(), kind
            else:  # disabled, unless another test's seed device is attached: never for LXD
                assert not enabled.exists() or "LXD" not in enabled.read_text(), kind


def test_both_generators_enable_the_agent_on_an_lxd_vm(tmp_path):
    from tests.agent.datasources.cloudlab import generators

    for kind, verdict in generators(str(tmp_path), {"board_name": "LXD"}).items():
        assert verdict.startswith("enabled") and "board_name" in verdict, (kind, verdict)
