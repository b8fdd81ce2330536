"""MAAS's metadata API (``/MAAS/metadata/...``) from ``cloudseed serve`` on SQLite and PostgreSQL:
OAuth PLAINTEXT checked on every request (also on the server's by-path fast path), 401 with a Date
header for a wrong or stale signature; and Debian's cloud-init 22.4 DataSourceMAAS (oauthlib
signing) reading it as a real client.
"""

from __future__ import annotations

import email.utils
import json
import time

import pytest

from cloudseed.core import oauth
from tests.provider.server.server_support import ServerProcess, new_address
from tests.reference import reference_python

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
KEY2 = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ bob@example"
USER_DATA = "#cloud-config\nruncmd: [[touch, /run/maas]]\n"
VENDOR = "#cloud-config\nntp: {servers: [10.0.0.1]}\n"
CREDS = {"consumer_key": "Cq7mXnbJvS4mB9Z2Ly", "token_key": "Hz3Vn8pTqJ2wR6yL5s", "token_secret":
         "PbYq7xKj2LmNw9RtZs4VcXu3HfGd8Ea1", "consumer_secret": ""}
RECORD = {k: v for k, v in CREDS.items() if v}  # an empty consumer_secret is left out (the default)
BASE = "/MAAS/metadata/2012-03-01"


def signed(creds=CREDS, **kw) -> dict:
    return {"Authorization": oauth.header(creds["consumer_key"], creds["token_key"], creds["token_secret"],
                                          creds["consumer_secret"], **kw)}


def register(server, **extra) -> tuple[str, str]:
    address = new_address()
    instance_id = "node-" + address.replace(".", "-")
    fields = {"instance_id": instance_id, "hostname": "maas-node-1",
              "addresses": [{"address": address, "network": "default"}],
              "ssh_keys": [{"name": "a", "data": KEY}, {"name": "b", "data": KEY2}], "user_data": USER_DATA,
              "vendor_data": VENDOR, "clouds": {"maas": dict(RECORD)}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address


def test_files_with_a_good_signature(server):
    instance_id, address = register(server)
    assert server.get("/MAAS/metadata/", address).text == "2012-03-01\nlatest\n"
    assert server.get(f"{BASE}/", address, headers=signed()).text == "meta-data\nuser-data\n"
    assert server.get(f"{BASE}/meta-data/", address, headers=signed()).text == \
        "instance-id\nlocal-hostname\npublic-keys\nvendor-data\n"
    assert server.get(f"{BASE}/meta-data/instance-id", address, headers=signed()).text == instance_id
    assert server.get(f"{BASE}/meta-data/local-hostname", address, headers=signed()).text == "maas-node-1"
    assert server.get(f"{BASE}/meta-data/public-keys", address, headers=signed()).text == f"{KEY}\n{KEY2}"
    import yaml

    assert yaml.safe_load(server.get(f"{BASE}/meta-data/vendor-data", address, headers=signed()).text) == \
        {"cloud-init": VENDOR}
    assert server.get(f"{BASE}/user-data", address, headers=signed()).text == USER_DATA
    assert server.get("/MAAS/metadata/latest/meta-data/instance-id", address, headers=signed()).text == instance_id
    assert server.get(f"{BASE}/meta-data/nothing", address, headers=signed()).status == 404
    assert server.get(f"{BASE}/user-data", address, headers=signed(), method="POST").status == 405


@pytest.mark.parametrize("headers,message", [
    ({}, "no Authorization header"),
    ({"Authorization": "Bearer abc"}, "not OAuth"),
    (signed({**CREDS, "token_secret": "wrong"}), "invalid signature"),
    (signed({**CREDS, "consumer_secret": "x"}), "invalid signature"),
    (signed({**CREDS, "token_key": "other"}), "unknown token"),
    (signed({**CREDS, "consumer_key": "other"}), "unknown consumer key"),
    (signed(timestamp=int(time.time()) - 3600), "expired timestamp"),
    ({"Authorization": 'OAuth oauth_consumer_key="x", oauth_token'}, "malformed OAuth parameter"),
])
def test_refused_with_401_and_a_date(server, headers, message):
    _, address = register(server)
    # a good request first: its answer must not be served again by path without the check
    assert server.get(f"{BASE}/meta-data/instance-id", address, headers=signed()).status == 200
    reply = server.get(f"{BASE}/meta-data/instance-id", address, headers=headers)
    assert reply.status == 401 and message in reply.text, reply.text
    assert reply.headers["www-authenticate"] == 'OAuth realm="OAuth"'
    assert abs(email.utils.parsedate_to_datetime(reply.headers["date"]).timestamp() - time.time()) < 60


def test_no_credentials_no_api_and_isolation(server):
    _, bare = register(server, clouds={})
    assert server.get(f"{BASE}/meta-data/instance-id", bare, headers=signed()).status == 404
    one_id, one = register(server)
    other = {**CREDS, "token_key": "Zz9Vn8pTqJ2wR6yL5s", "consumer_secret": "s3cr3t"}
    two_id, two = register(server, hostname="maas-node-2", user_data=None, vendor_data=None,
                           clouds={"maas": other})
    assert server.get(f"{BASE}/meta-data/instance-id", one, headers=signed()).text == one_id
    assert server.get(f"{BASE}/meta-data/instance-id", two, headers=signed()).status == 401  # one's keys
    assert server.get(f"{BASE}/meta-data/instance-id", two, headers=signed(other)).text == two_id
    assert server.get(f"{BASE}/user-data", two, headers=signed(other)).status == 404  # none: 404, as MAAS
    assert server.get(f"{BASE}/meta-data/vendor-data", two, headers=signed(other)).status == 404


def test_bad_clouds_maas_settings_are_refused(server):
    reply = server.admin("POST", "/v1/instances", {"instance_id": "bad-maas", "clouds": {"maas": {"token": "x"}}})
    assert reply.status == 400 and "clouds.maas.token" in reply.text


REFERENCE = """
import json, sys
from cloudinit import distros, helpers
from cloudinit.sources import DataSourceMAAS as m
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
distro = distros.fetch("debian")("debian", {}, paths)
cfg = json.loads(sys.argv[2])
ds = m.DataSourceMAAS({"datasource": {"MAAS": cfg}}, distro, paths)
ds.oauth_helper.skew_data_file = tmp + "/oauth_skew.json"  # not /run/oauth_skew.json of this host
ok = ds.get_data()
vd = ds.vendordata_raw
print(json.dumps({"ok": ok, "metadata": ds.metadata, "userdata": ds.userdata_raw.decode() if ds.userdata_raw
                  else None, "vendordata": vd, "keys": ds.get_public_ssh_keys() if ok else None}, default=str))
"""


@pytest.fixture(scope="module")
def loopback_server(tmp_path_factory):
    """A server of its own whose one instance is 127.0.0.1, so any local client is that instance."""
    proc = ServerProcess(str(tmp_path_factory.mktemp("maas-db") / "server.db"),
                         str(tmp_path_factory.mktemp("maas-server")), ["127.0.0.1:0"], config={"rate_limit": 0})
    proc.add(instance_id="node-ref", hostname="maas-ref", addresses=[{"address": "127.0.0.1", "network": "default"}],
             ssh_keys=[{"name": "a", "data": KEY}, {"name": "b", "data": KEY2}], user_data=USER_DATA,
             vendor_data=VENDOR, clouds={"maas": dict(RECORD)})
    yield proc
    proc.stop()


@pytest.mark.reference
def test_reference_maas_datasource_reads_the_emulation(loopback_server, tmp_path):
    cfg = {"metadata_url": f"http://127.0.0.1:{loopback_server.port}/MAAS/metadata/", "max_wait": 10, **CREDS}
    ref = json.loads(reference_python(REFERENCE, str(tmp_path), json.dumps(cfg)).stdout.strip().splitlines()[-1])
    assert ref["ok"] is True
    assert ref["metadata"] == {"instance-id": "node-ref", "local-hostname": "maas-ref",
                               "public-keys": f"{KEY}\n{KEY2}"}
    assert ref["userdata"] == USER_DATA and ref["vendordata"] == VENDOR and ref["keys"] == [KEY, KEY2]
    # with wrong keys the reference gets nothing (its error is only logged)
    bad = dict(cfg, token_secret="nope", max_wait=3)
    ref = json.loads(reference_python(REFERENCE, str(tmp_path), json.dumps(bad)).stdout.strip().splitlines()[-1])
    assert ref["ok"] is False
