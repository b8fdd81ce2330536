"""The MAAS datasource: detection only when configured (seed directory, metadata_url, MAAS's kernel
command line), the seed directory and ``cloudseed serve``'s OAuth-checked MAAS API read by the agent
and by cloud-init 22.4's DataSourceMAAS; the clock-skew retry against a server that really checks
timestamps (the agent's clock set an hour back); wrong keys, missing files, hostile YAML, a server
that never answers and one that closes mid-reply.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from cloudseed.agent.datasources import NETWORK, DatasourceContext, find_datasource
from cloudseed.agent.datasources.maas import MAAS, MAASError, read_seed_dir
from cloudseed.agent.state import Paths
from tests.agent.datasources.netlab import write_tree
from tests.provider.server.server_support import ServerProcess

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
KEY2 = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ bob@example"
USER_DATA = "#cloud-config\nruncmd: [[touch, /run/maas]]\n"
VENDOR = "#cloud-config\nntp: {servers: [10.0.0.1]}\n"
CREDS = {"consumer_key": "Cq7mXnbJvS4mB9Z2Ly", "token_key": "Hz3Vn8pTqJ2wR6yL5s",
         "token_secret": "PbYq7xKj2LmNw9RtZs4VcXu3HfGd8Ea1", "consumer_secret": ""}
IQN = "iqn.2004-05.com.ubuntu:maas"


def context(target, section=None, cmdline="") -> DatasourceContext:
    cfg = {"datasource": {"MAAS": section}} if section else {}
    return DatasourceContext(root=target, cfg=cfg, cmdline=cmdline, paths=Paths(target), stage=NETWORK)


SEED = {"meta-data/instance-id": "node-seed", "meta-data/local-hostname": "maas-seed",
        "meta-data/public-keys": f"{KEY}\n{KEY2}\n", "meta-data/vendor-data": f"cloud-init: {json.dumps(VENDOR)}\n",
        "user-data": USER_DATA}


def test_detection_only_when_configured(target):
    assert MAAS.why(context(target)) is None
    assert find_datasource(context(target), ["MAAS"]).tried == []
    # MAAS has no DMI mark: a machine that says nothing is never tried, whatever its DMI
    write_tree(target.top, {"sys/class/dmi/id/sys_vendor": "QEMU\n"})
    assert MAAS.why(context(target)) is None
    assert MAAS.why(context(target, {"metadata_url": "http://10.0.0.1:5240/MAAS/metadata/"})) == \
        "datasource.MAAS.metadata_url is configured"
    ephemeral = f"ip=::::node:BOOTIF ro cloud-config-url=http://x/ iscsi_target_name={IQN}:x"
    assert MAAS.why(context(target, cmdline=ephemeral)) == "kernel command line has MAAS's cloud-config-url"
    assert MAAS.why(context(target, cmdline="cloud-config-url=http://x/")) is None  # not MAAS's (no iqn)
    write_tree(target.top, {"var/lib/cloud/seed/maas/.keep": ""})
    assert MAAS.why(context(target)) == "seed directory /var/lib/cloud/seed/maas"


def test_seed_directory(target):
    write_tree(target.top, {f"var/lib/cloud/seed/maas/{k}": v for k, v in SEED.items()})
    ds = find_datasource(context(target), ["MAAS"]).datasource
    assert ds.instance_id == "node-seed" and ds.local_hostname == "maas-seed" and ds.public_keys == [KEY, KEY2]
    assert ds.userdata_raw == USER_DATA.encode() and ds.vendordata_raw == VENDOR.encode()
    assert ds.subplatform == "seed-dir (/var/lib/cloud/seed/maas)"


@pytest.mark.parametrize("files,message", [
    ({"meta-data/instance-id": "x"}, "missing required meta-data/local-hostname"),
    ({"user-data": "x"}, "missing required meta-data/instance-id, meta-data/local-hostname"),
    ({**SEED, "meta-data/vendor-data": "a: [unclosed\n"}, "meta-data/vendor-data: not YAML"),
    ({**SEED, "meta-data/vendor-data": "!!python/object/apply:os.system [id]\n"}, "not YAML"),
])
def test_bad_seed_directories_name_the_file(tmp_path, files, message):
    top = str(tmp_path / "maas")
    write_tree(top, files)
    with pytest.raises(MAASError) as e:
        read_seed_dir(top, "/var/lib/cloud/seed/maas")
    assert message in str(e.value) and "/var/lib/cloud/seed/maas" in str(e.value)


REFERENCE = """
import json, sys
from cloudinit import distros, helpers
from cloudinit.sources import DataSourceMAAS as m
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
distro = distros.fetch("debian")("debian", {}, paths)
cfg = json.loads(sys.argv[2])
ds = m.DataSourceMAAS({"datasource": {"MAAS": cfg}}, distro, paths)
if len(sys.argv) > 3:
    ds.seed_dir = sys.argv[3]
ds.oauth_helper.skew_data_file = tmp + "/oauth_skew.json"  # not /run/oauth_skew.json of this host
ok = ds.get_data()
vd = ds.vendordata_raw
print(json.dumps({"ok": ok, "metadata": ds.metadata, "userdata": ds.userdata_raw.decode() if ds.userdata_raw
                  else None, "vendordata": vd, "keys": ds.get_public_ssh_keys() if ok else None}, default=str))
"""


def reference(tmp_path, cfg, seed=None) -> dict:
    from tests.reference import reference_python

    args = [str(tmp_path), json.dumps(cfg)] + ([seed] if seed else [])
    return json.loads(reference_python(REFERENCE, *args).stdout.strip().splitlines()[-1])


def same_as(ds, ref) -> None:
    assert ref["ok"] is True
    assert ds.metadata == ref["metadata"]
    assert ds.userdata_raw.decode() == ref["userdata"] and ds.vendordata_raw.decode() == ref["vendordata"]
    assert ds.public_keys == ref["keys"]


def test_seed_directory_same_as_cloud_init(target, tmp_path):
    write_tree(target.top, {f"var/lib/cloud/seed/maas/{k}": v for k, v in SEED.items()})
    ds = find_datasource(context(target), ["MAAS"]).datasource
    same_as(ds, reference(tmp_path, {}, target.path("/var/lib/cloud/seed/maas")))


@pytest.fixture(scope="module")
def maas_server(tmp_path_factory):
    """``cloudseed serve`` whose one instance is 127.0.0.1 (so this process is that instance)."""
    proc = ServerProcess(str(tmp_path_factory.mktemp("maas-db") / "server.db"),
                         str(tmp_path_factory.mktemp("maas-server")), ["127.0.0.1:0"], config={"rate_limit": 0})
    proc.add(instance_id="node-4y3h8a", hostname="maas-node",
             addresses=[{"address": "127.0.0.1", "network": "default"}],
             ssh_keys=[{"name": "a", "data": KEY}, {"name": "b", "data": KEY2}], user_data=USER_DATA,
             vendor_data=VENDOR, clouds={"maas": {k: v for k, v in CREDS.items() if v}})
    proc.url = f"http://127.0.0.1:{proc.port}/MAAS/metadata/"
    yield proc
    proc.stop()


def test_metadata_service_same_as_cloud_init(target, tmp_path, maas_server):
    cfg = {"metadata_url": maas_server.url, "max_wait": 10, **CREDS}
    search = find_datasource(context(target, cfg), ["MAAS"])
    ds = search.datasource
    assert ds is not None, search.errors
    assert ds.instance_id == "node-4y3h8a" and ds.subplatform == f"seed-dir ({maas_server.url})"
    same_as(ds, reference(tmp_path, cfg))


def test_wrong_keys_are_a_clear_error(target, maas_server):
    cfg = {"metadata_url": maas_server.url, "max_wait": 5, **CREDS, "token_secret": "wrong"}
    started = time.monotonic()
    search = find_datasource(context(target, cfg), ["MAAS"])
    assert search.datasource is None and time.monotonic() - started < 5
    assert "HTTP 401: the MAAS server refused the OAuth credentials" in search.errors[0]
    assert "invalid signature" in search.errors[0] and "/2012-03-01/meta-data/instance-id" in search.errors[0]
    half = {"metadata_url": maas_server.url, "consumer_key": "x"}
    assert "all or none" in find_datasource(context(target, half), ["MAAS"]).errors[0]


class _Clock:
    """``time`` as seen by the agent's OAuth signing, an hour behind (a node with a wrong RTC)."""

    def __init__(self, offset: float):
        self.offset = offset

    def time(self) -> float:
        return time.time() + self.offset

    def __getattr__(self, name):
        return getattr(time, name)


def test_clock_skew_is_corrected_from_the_servers_date(target, maas_server, monkeypatch, caplog):
    from cloudseed.agent.datasources import maas
    from cloudseed.core import oauth

    clock = _Clock(-3600)
    monkeypatch.setattr(maas, "time", clock)
    monkeypatch.setattr(oauth, "time", clock)
    cfg = {"metadata_url": maas_server.url, "max_wait": 10, **CREDS}
    search = find_datasource(context(target, cfg), ["MAAS"])
    assert search.datasource is not None, search.errors
    assert search.datasource.instance_id == "node-4y3h8a"
    assert "setting the OAuth clock skew for 127.0.0.1" in caplog.text


class Scripted:
    """A loopback server that, on every connection, hangs (``hang``) or sends half a reply (``cut``)."""

    def __init__(self, mode: str):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/MAAS/metadata/"
        self.mode, self.conns = mode, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            conn.recv(65536)
            if self.mode == "cut":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nnode-")
                conn.close()

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.mark.parametrize("mode", ["hang", "cut"])
def test_hanging_and_cutting_servers_are_bounded(target, mode):
    srv = Scripted(mode)
    try:
        started = time.monotonic()
        search = find_datasource(context(target, {"metadata_url": srv.url, "max_wait": 2, "timeout": 1, **CREDS}),
                                 ["MAAS"])
        took = time.monotonic() - started
    finally:
        srv.close()
    assert search.datasource is None and took < 6, (took, search.errors)
    assert srv.url.rstrip("/") + "/2012-03-01/meta-data/instance-id" in search.errors[0], search.errors
    if mode == "cut":
        assert "closed after" in search.errors[0]


def test_kernel_command_line_cloud_config_url(target, maas_server):
    import http.server

    doc = ("#cloud-config\ndatasource:\n  MAAS:\n" + "".join(f"    {k}: '{v}'\n" for k, v in CREDS.items())
           + f"    metadata_url: {maas_server.url}\nreporting: {{maas: {{type: webhook}}}}\n").encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(len(doc)))
            self.end_headers()
            self.wfile.write(doc)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    cmdline = f"ro cloud-config-url=http://127.0.0.1:{httpd.server_address[1]}/cc iscsi_target_name={IQN}:node"
    try:
        search = find_datasource(context(target, cmdline=cmdline), ["MAAS"])
    finally:
        httpd.shutdown()
        httpd.server_close()
    ds = search.datasource
    assert ds is not None, search.errors
    assert ds.instance_id == "node-4y3h8a"
    # the whole document sits under the system config (root-only), as cloud-init's /run/cloud-init/cloud.cfg
    assert ds.extra["cloud_config"]["reporting"] == {"maas": {"type": "webhook"}}


def test_agent_provisions_from_the_maas_api_and_keeps_the_keys_private(target, maas_server):
    import stat

    cfg = {"metadata_url": maas_server.url, "max_wait": 10, **CREDS}
    target.write("/etc/cloud/cloud.cfg.d/90_dpkg_maas.cfg", json.dumps({"datasource": {"MAAS": cfg}}) + "\n")
    target.write("/etc/cloudseed/cloud.cfg.d/90-test.cfg",
                 "datasource_list: [MAAS, None]\ncloud_init_modules: [write_files, set_hostname]\n"
                 "cloud_config_modules: []\ncloud_final_modules: []\n")
    target.write("/usr/lib/systemd/systemd-networkd", "#!/bin/sh\n", mode=0o755)
    from cloudseed.agent.boot.stages import Agent

    agent = Agent(target)
    assert agent.run_local() == 0
    assert agent.run_network() == 0
    public = target.read_text("/run/cloudseed/instance-data.json")
    data = json.loads(public)
    assert (data["v1"]["platform"], data["v1"]["instance_id"]) == ("maas", "node-4y3h8a")
    assert data["v1"]["public_ssh_keys"] == [KEY, KEY2]
    assert CREDS["token_secret"] not in public  # the OAuth secret is in the config: root-only
    sensitive_path = "/run/cloudseed/instance-data-sensitive.json"
    sensitive = target.path(sensitive_path)
    assert stat.S_IMODE(os.stat(sensitive).st_mode) == 0o600
    assert CREDS["token_secret"] in target.read_text(sensitive_path)
    assert target.read_text("/etc/hostname").strip() == "maas-node"
