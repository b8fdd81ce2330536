"""NoCloud seeds as cloud-init 24.x-26.x reads them: network-config beside user-data in every kind of
seed, seeds over FTP and FTPS (real servers on loopback), and the ``ds=nocloud;s=...`` forms
(the stage chosen by the seed's scheme, ``%s`` in the URL, a query string, ``__dmi.NAME__``).

The URL forms and the command-line parsing are compared with cloud-init 26.x itself: its
``read_seeded`` and ``load_cmdline_data`` against the same loopback server and command lines.
"""

from __future__ import annotations

import http.server
import json
import os
import ssl
import threading

import pytest

from cloudseed.agent.datasources import LOCAL, NETWORK, DatasourceContext
from cloudseed.agent.datasources.nocloud import NoCloud, parse_ds_argument
from cloudseed.agent.state import Paths
from cloudseed.core.http import FetchError
from tests.agent.datasources.ftp_server import FtpServer

META = b"instance-id: iid-seed\nlocal-hostname: seeded\n"
USER = b"#cloud-config\nruncmd: [echo hi]\n"
NETWORK_CFG = b"version: 2\nethernets:\n  eth0:\n    dhcp4: true\n"
WANTED_NETWORK = {"version": 2, "ethernets": {"eth0": {"dhcp4": True}}}


def fetch(root, stage: str, cmdline: str = "", cfg: dict | None = None) -> NoCloud:
    ds = NoCloud(DatasourceContext(root, cfg or {}, cmdline, Paths(root), stage))
    assert ds.fetch(), ds.warnings
    return ds


def write_seed(directory, files: dict[str, bytes]) -> None:
    os.makedirs(directory, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


SEED = {"meta-data": META, "user-data": USER, "network-config": NETWORK_CFG}


# ---- network-config in every kind of seed ----

def test_network_config_from_a_seed_directory(target):
    write_seed(target.path("/var/lib/cloud/seed/nocloud"), SEED)
    assert fetch(target, LOCAL).network_config == WANTED_NETWORK


def test_network_config_from_the_datasource_configuration_mapping_or_text(target):
    for given in (WANTED_NETWORK, NETWORK_CFG.decode(), {"network": WANTED_NETWORK}):
        cfg = {"datasource": {"NoCloud": {"meta-data": {"instance-id": "iid-cfg"}, "user-data": USER.decode(),
                                          "network-config": given}}}
        ds = fetch(target, LOCAL, cfg=cfg)
        assert ds.network_config == WANTED_NETWORK and ds.metadata["instance-id"] == "iid-cfg"


def test_network_config_from_a_file_seedfrom(target, tmp_path):
    write_seed(tmp_path / "seed", SEED)
    ds = fetch(target, LOCAL, cmdline=f"ro ds=nocloud;s=file://{tmp_path}/seed/")
    assert ds.network_config == WANTED_NETWORK and ds.metadata["local-hostname"] == "seeded"


class SeedHttp:
    """Serves a seed under /seed/ and records every path asked for."""

    def __init__(self, files: dict[str, bytes]):
        self.asked: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.asked.append(self.path)
                name = self.path.split("?")[0].rsplit("/", 1)[-1]
                if "?" in self.path and not self.path.endswith("?"):
                    name = self.path.rsplit("=", 1)[-1] if "file=" in self.path else self.path.rsplit("/", 1)[-1]
                body = files.get(name.split("?")[0]) if self.path.startswith("/seed") else None
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def seed_http():
    server = SeedHttp(SEED)
    yield server
    server.close()


def test_network_config_from_an_http_seedfrom_in_the_network_stage(target, seed_http):
    cmdline = f"ro ds=nocloud;s={seed_http.url}/seed/"
    # the seed's scheme says which stage: the local stage leaves an http seed to the network stage
    assert parse_ds_argument(cmdline)["dsmode"] == "net"
    assert not NoCloud(DatasourceContext(target, {}, cmdline, Paths(target), LOCAL)).fetch()
    ds = fetch(target, NETWORK, cmdline=cmdline)
    assert ds.network_config == WANTED_NETWORK and ds.userdata_raw == USER


# ---- FTP and FTPS seeds ----

@pytest.fixture
def ftp_seed(tmp_path):
    write_seed(tmp_path / "ftproot" / "seed", SEED)
    return str(tmp_path / "ftproot")


def test_seed_over_ftp_anonymous_and_with_a_user(target, ftp_seed):
    with FtpServer(ftp_seed) as server:
        for who in ("", "seed:s3cret@"):
            ds = fetch(target, NETWORK, cmdline=f"ds=nocloud;s=ftp://{who}127.0.0.1:{server.port}/seed/")
            assert ds.metadata["instance-id"] == "iid-seed" and ds.userdata_raw == USER
            assert ds.network_config == WANTED_NETWORK
            assert ds.vendordata_raw is None      # 550: an absent file, not an error
            assert ds.warnings == []


def test_seed_over_ftps_verifies_the_server_and_refuses_plain_ftp(target, ftp_seed, tmp_path, monkeypatch):
    certs = tmp_path / "certs"
    certs.mkdir()
    with FtpServer(ftp_seed, tls=True, cert_dir=str(certs)) as server:
        url = f"ftps://127.0.0.1:{server.port}/seed/"
        # not trusted yet: the certificate is refused, nothing is read
        from cloudseed.core.ftp import fetch_ftp

        with pytest.raises(FetchError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            fetch_ftp(url + "meta-data", max_bytes=1024, timeout=5)
        monkeypatch.setenv("SSL_CERT_FILE", server.ca_file)
        assert ssl.create_default_context().cert_store_stats()["x509_ca"] >= 1
        ds = fetch(target, NETWORK, cmdline=f"ds=nocloud;s={url}")
        assert ds.metadata["local-hostname"] == "seeded" and ds.network_config == WANTED_NETWORK
        # the same server over ftp:// refuses the login in the clear; a plain server over ftps:// is refused
        with pytest.raises(FetchError):
            fetch_ftp(f"ftp://127.0.0.1:{server.port}/seed/meta-data", max_bytes=1024, timeout=5)
    with FtpServer(ftp_seed) as plain, pytest.raises(FetchError, match="does not offer TLS"):
        fetch_ftp(f"ftps://127.0.0.1:{plain.port}/seed/meta-data", max_bytes=1024, timeout=5)


def test_ftp_transfers_are_bounded(ftp_seed):
    from cloudseed.core.ftp import fetch_ftp

    with open(os.path.join(ftp_seed, "seed", "big"), "wb") as f:
        f.write(b"x" * 300_000)
    with FtpServer(ftp_seed) as server:
        with pytest.raises(FetchError, match="larger than the limit of 100000"):
            fetch_ftp(f"ftp://127.0.0.1:{server.port}/seed/big", max_bytes=100_000, timeout=5)
        with pytest.raises(FetchError) as missing:
            fetch_ftp(f"ftp://127.0.0.1:{server.port}/seed/nothing", max_bytes=1024, timeout=5)
        assert missing.value.status == 404


# ---- the seedfrom forms, against cloud-init 26.x ----

SEEDFROM_FORMS = ["/seed/", "/seed", "/seed/%s", "/seed/?v=1&file=%s", "/seed?token=abc"]

_THEIR_URLS = r"""
import json, sys
from cloudinit import util
for base in json.loads(sys.argv[1]):
    try:
        util.read_seeded(base, timeout=2, retries=0)
    except Exception:
        pass
"""


@pytest.mark.reference
def test_seed_urls_are_the_ones_cloud_init_26_asks_for(target, seed_http):
    from tests.reference import NEW

    bases = [seed_http.url + form for form in SEEDFROM_FORMS]
    NEW.python(_THEIR_URLS, json.dumps(bases))
    theirs = sorted(set(seed_http.asked))
    seed_http.asked.clear()
    for base in bases:
        ds = NoCloud(DatasourceContext(target, {}, f"ds=nocloud;s={base}", Paths(target), NETWORK))
        try:
            ds.fetch()
        except Exception:  # noqa: BLE001 - a form whose files are not there: only the URLs matter here
            pass
    ours = sorted(set(seed_http.asked))
    # cloud-init stops at a missing meta-data; the URLs both always ask for are compared
    first = ("network-config", "meta-data")
    assert [p for p in ours if p.endswith(first)] == [p for p in theirs if p.endswith(first)]
    # /seed/, /seed and /seed/%s ask for the same files; the query forms for their own
    assert len([p for p in theirs if p.endswith(first)]) == 6


CMDLINES = [
    "ro ds=nocloud",
    "ro ds=nocloud-net",
    "ds=nocloud;s=http://10.0.0.1/seed/",
    "ds=nocloud;s=file:///var/seed/;i=iid-1;h=host-1",
    "ds=nocloud-net;s=file:///var/seed/",
    "ds=nocloud;s=ftps://10.0.0.1/seed/",
    "ds=nocloud;s=ftp://u:p@10.0.0.1/seed/;dsmode=local",
    "ds=nocloud;seedfrom=https://example.com/%s?x=1",
    "quiet ds=nocloud;i=abc;h=;flag splash",
]

_THEIR_CMDLINE = r"""
import json, sys
from cloudinit.sources.DataSourceNoCloud import load_cmdline_data
out = []
for line in json.loads(sys.argv[1]):
    fill = {}
    out.append(fill if load_cmdline_data(fill, line) else None)
print(json.dumps(out))
"""


@pytest.mark.reference
def test_ds_arguments_parse_as_cloud_init_26_parses_them():
    from tests.reference import NEW

    theirs = json.loads(NEW.python(_THEIR_CMDLINE, json.dumps(CMDLINES)).stdout)
    ours = [parse_ds_argument(line) for line in CMDLINES]
    assert ours == theirs


def test_dmi_variables_in_seedfrom(target, seed_http):
    os.makedirs(target.path("/sys/class/dmi/id"), exist_ok=True)
    with open(target.path("/sys/class/dmi/id/product_serial"), "w") as f:
        f.write("seed\n")
    ds = fetch(target, NETWORK, cmdline=f"ds=nocloud;s={seed_http.url}/__dmi.system-serial-number__/")
    assert ds.metadata["instance-id"] == "iid-seed"
    assert "/seed/meta-data" in seed_http.asked


def test_eni_network_interfaces_in_meta_data_is_reported_not_ignored(target):
    write_seed(target.path("/var/lib/cloud/seed/nocloud"), {
        "meta-data": META + b"network-interfaces: |\n  auto eth0\n  iface eth0 inet dhcp\n", "user-data": USER})
    ds = fetch(target, LOCAL)
    assert ds.network_config is None
    assert ds.warnings == ["NoCloud meta-data network-interfaces (ENI) is deprecated in cloud-init 24.3 and not "
                           "read by cloudseed: give a network-config (v1 or v2) instead"]
