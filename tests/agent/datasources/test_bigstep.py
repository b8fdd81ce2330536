"""The Bigstep datasource: a real HTTP server on loopback serving the one JSON document, read by the
agent and by cloud-init 22.4's DataSourceBigstep (its cloud_dir pointed at the same seed file),
plus hostile answers (not JSON, truncated, a missing key, a server that never answers, one that
closes mid-reply).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from cloudseed.agent.datasources import NETWORK, DatasourceContext, find_datasource
from cloudseed.agent.datasources.bigstep import Bigstep, BigstepError
from cloudseed.agent.state import Paths
from tests.agent.datasources.hostile_http import HostileServer

DOC = {"metadata": {"instance-id": "bs-4242", "local-hostname": "bs-node", "public-keys": ["ssh-ed25519 AAAA k"]},
       "userdata_raw": "#cloud-config\nruncmd: [[touch, /run/bigstep]]\n",
       "vendordata_raw": "#cloud-config\npackages: [htop]\n"}


def doc_url(srv: HostileServer) -> str:
    return f"{srv.base}/doc"


def context(target, cfg=None) -> DatasourceContext:
    return DatasourceContext(root=target, cfg=cfg or {}, cmdline="", paths=Paths(target), stage=NETWORK)


def seed(target, url: str) -> None:
    target.write("/var/lib/cloud/data/seed/bigstep/url", url + "\n")


def test_detection_is_the_url_file_only(target):
    assert Bigstep.why(context(target)) is None
    assert find_datasource(context(target), ["Bigstep"]).tried == []  # no request, no wait
    seed(target, "http://127.0.0.1:9/doc")
    assert Bigstep.why(context(target)) == "/var/lib/cloud/data/seed/bigstep/url exists"


def test_reads_the_document(target):
    srv = HostileServer(json.dumps(DOC).encode(), path="/doc")
    try:
        seed(target, doc_url(srv))
        ds = find_datasource(context(target), ["Bigstep"]).datasource
    finally:
        srv.close()
    assert ds.instance_id == "bs-4242" and ds.local_hostname == "bs-node"
    assert ds.userdata_raw == DOC["userdata_raw"].encode() and ds.vendordata_raw == DOC["vendordata_raw"].encode()
    assert ds.public_keys == ["ssh-ed25519 AAAA k"] and ds.subplatform == f"metadata ({doc_url(srv)})"


@pytest.mark.parametrize("body,message", [
    (b"<html>not json</html>", "not a JSON document"),
    (json.dumps(DOC).encode()[:40], "not a JSON document"),
    (b"[1, 2]", "expected a JSON object, got list"),
    (json.dumps({"metadata": {}, "userdata_raw": ""}).encode(), "has no vendordata_raw"),
    (json.dumps({**DOC, "metadata": "x"}).encode(), "'metadata' is str"),
    (json.dumps({**DOC, "userdata_raw": {"a": 1}}).encode(), "'userdata_raw' is dict"),
])
def test_bad_documents_are_errors_naming_the_url(target, body, message):
    srv = HostileServer(body, path="/doc")
    try:
        seed(target, doc_url(srv))
        search = find_datasource(context(target), ["Bigstep"])
    finally:
        srv.close()
    assert search.datasource is None
    assert len(search.errors) == 1 and message in search.errors[0] and doc_url(srv) in search.errors[0], search.errors


@pytest.mark.parametrize("mode", ["silent", "cut"])
def test_a_server_that_hangs_or_cuts_is_bounded(target, mode):
    srv = HostileServer(json.dumps(DOC).encode(), mode, path="/doc")
    cfg = {"datasource": {"Bigstep": {"timeout": 1, "retries": 1}}}
    try:
        seed(target, doc_url(srv))
        started = time.monotonic()
        search = find_datasource(context(target, cfg), ["Bigstep"])
        took = time.monotonic() - started
    finally:
        srv.close()
    assert search.datasource is None and took < 6, took
    assert "Bigstep metadata (URL from /var/lib/cloud/data/seed/bigstep/url)" in search.errors[0], search.errors
    if mode == "cut":  # a body shorter than its Content-Length is an error, not half a document
        assert "the connection closed after" in search.errors[0], search.errors


def test_url_file_with_something_else_is_refused(target):
    seed(target, "/etc/shadow")
    search = find_datasource(context(target), ["Bigstep"])
    assert search.datasource is None and "is not an http(s) URL" in search.errors[0]
    with pytest.raises(BigstepError):
        Bigstep(context(target)).fetch()


REFERENCE = r"""
import json, sys
from cloudinit import distros, helpers
from cloudinit.sources.DataSourceBigstep import DataSourceBigstep
tmp = sys.argv[1]
paths = helpers.Paths({"cloud_dir": tmp + "/var/lib/cloud", "run_dir": tmp + "/run"})
distro = distros.fetch("debian")("debian", {}, paths)
ds = DataSourceBigstep({}, distro, paths)
ok = ds._get_data()
print(json.dumps({"ok": ok, "metadata": ds.metadata, "userdata": ds.userdata_raw,
                  "vendordata": ds.vendordata_raw}))
"""


def test_same_data_as_cloud_init(target):
    from tests.reference import reference_python

    srv = HostileServer(json.dumps(DOC).encode(), path="/doc")
    try:
        # cloud-init reads the file as it is (with its newline): requests strips it
        seed(target, doc_url(srv))
        ref = json.loads(reference_python(REFERENCE, target.top).stdout)
        ds = find_datasource(context(target), ["Bigstep"]).datasource
    finally:
        srv.close()
    assert ref["ok"] is True
    assert ds.metadata == ref["metadata"]
    assert ds.userdata_raw.decode() == ref["userdata"] and ds.vendordata_raw.decode() == ref["vendordata"]
    assert os.path.isfile(os.path.join(target.top, "var/lib/cloud/data/seed/bigstep/url"))
