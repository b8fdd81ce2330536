"""The CloudSigma datasource over a real pty answered by a server context emulation (cepko).

``serial_responders.CepkoResponder`` answers ``<\\n\\n>`` with the context as one JSON line ended by
EOT; the agent reads the pty slave as its ``serial_device``. Debian's cloud-init 22.4
``DataSourceCloudSigma`` (with its pyserial) reads the same kind of responder through its own pty:
instance id, hostname, key, user-data and vendor-data must agree. Bad hosts are bounded and named.
"""

from __future__ import annotations

import base64
import json
import time

import pytest

from cloudseed.agent.datasources import LOCAL, DatasourceContext, find_datasource
from cloudseed.agent.datasources.cloudsigma import CepkoError, CloudSigma
from cloudseed.agent.state import Paths
from cloudseed.agent.state.instance_data_json import build, redact
from tests.agent.datasources.serial_responders import CepkoResponder, Pty, run_reference

KEY = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC5 sigma@example"
USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-sigma, content: seen}\n"
CONTEXT = {
    "uuid": "65b2fb23-8c03-4187-a3ba-8b7c919e8890",
    "name": "test_server",
    "cpu": 1000, "mem": 1073741824, "smp": 1,
    "meta": {"ssh_public_key": KEY, "cloudinit-user-data": USER_DATA, "description": "a test server",
             "owner": "me"},
    "vendor_data": {"location": "zrh", "cloudinit": "#cloud-config\nvendor_seen: true\n"},
    "nics": [{"mac": "22:ab:83:d1:5a:f2", "ip_v4_conf": {"conf": "dhcp"}}],
}


@pytest.fixture
def pty():
    made: list = []

    def start(context=None, **kw) -> tuple[Pty, CepkoResponder]:
        p = Pty()
        r = CepkoResponder(p.master, CONTEXT if context is None else context, **kw)
        made.append((p, r))
        return p, r

    yield start
    for p, r in made:
        r.close()
        p.close()


def context(target, device: str | None = None, **ds) -> DatasourceContext:
    cfg = {"datasource": {"CloudSigma": {**({"serial_device": device} if device else {}), **ds}}}
    return DatasourceContext(root=target, cfg=cfg, cmdline="", paths=Paths(target), stage=LOCAL)


def sigma(target) -> None:
    target.write("/sys/class/dmi/id/product_name", "CloudSigma\n")


def test_detection_is_local_and_free(target):
    assert CloudSigma.why(context(target)) is None
    target.write("/sys/class/dmi/id/product_name", "KVM Virtual Machine\n")
    start = time.monotonic()
    search = find_datasource(context(target), ["CloudSigma"])
    assert search.tried == [] and search.datasource is None and time.monotonic() - start < 0.5
    sigma(target)
    assert CloudSigma.why(context(target)) == "DMI product_name is 'CloudSigma'"


def test_reads_the_context_over_a_pty(target, pty):
    sigma(target)
    port, host = pty()
    ds = find_datasource(context(target, port.path), ["CloudSigma"]).datasource
    assert ds is not None and ds.name == "CloudSigma" and host.requests == [""]
    assert ds.instance_id == CONTEXT["uuid"] and ds.local_hostname == "test_server"
    assert ds.public_keys == [KEY] and ds.userdata_raw == USER_DATA.encode()
    assert ds.vendordata_raw == b"#cloud-config\nvendor_seen: true\n"
    assert ds.subplatform == f"cepko ({port.path})" and ds.metadata["cpu"] == 1000
    public = json.dumps(redact(build(target, ds, {})))
    assert "write_files" not in public and "vendor_seen" not in public and CONTEXT["uuid"] in public


def test_base64_user_data_and_an_unusual_name(target, pty):
    sigma(target)
    meta = {"cloudinit-user-data": base64.b64encode(USER_DATA.encode()).decode(),
            "base64_fields": "cloudinit-user-data", "ssh_public_key": KEY}
    port, _ = pty({**CONTEXT, "name": "web{1}", "meta": meta})
    ds = find_datasource(context(target, port.path), ["CloudSigma"]).datasource
    assert ds.userdata_raw == USER_DATA.encode() and ds.local_hostname == "65b2fb23"


def test_dsmode_disabled_is_honoured_unlike_cloud_init(target, pty):
    """Deliberate difference: cloud-init 22.4 computes cloudinit-dsmode and never acts on it."""
    sigma(target)
    port, _ = pty({**CONTEXT, "meta": {**CONTEXT["meta"], "cloudinit-dsmode": "disabled"}})
    assert find_datasource(context(target, port.path), ["CloudSigma"]).datasource is None


def test_an_answer_ended_by_a_newline_only(target, pty):
    sigma(target)
    port, _ = pty(eot=b"\n")
    ds = find_datasource(context(target, port.path), ["CloudSigma"]).datasource
    assert ds is not None and ds.instance_id == CONTEXT["uuid"]


@pytest.mark.parametrize("mode,message", [
    ("silent", "no complete line in time .nothing received"),
    ("garbage", "is not JSON"),
    ("truncate", "no complete line in time .partial"),
])
def test_a_bad_host_is_bounded_and_named(target, pty, mode, message):
    sigma(target)
    port, _ = pty(mode=mode)
    start = time.monotonic()
    with pytest.raises(CepkoError, match=message):
        CloudSigma(context(target, port.path, timeout=1)).fetch()
    assert time.monotonic() - start < 2
    search = find_datasource(context(target, port.path, timeout=1), ["CloudSigma"])
    assert search.datasource is None and "CloudSigma" in search.errors[0]


def test_a_context_without_meta_or_uuid(target, pty):
    sigma(target)
    port, _ = pty({"uuid": "x"})
    with pytest.raises(CepkoError, match="no 'meta'"):
        CloudSigma(context(target, port.path, timeout=1)).fetch()
    port, _ = pty({"meta": {}})
    with pytest.raises(CepkoError, match="no 'uuid'"):
        CloudSigma(context(target, port.path, timeout=1)).fetch()


REFERENCE = """
from cloudinit.sources import DataSourceCloudSigma as m
from cloudinit.sources.helpers import cloudsigma as cepko
cepko.SERIAL_PORT = sys.argv[2]
cepko.READ_TIMEOUT = 5
fake_dmi("CloudSigma")
src = m.DataSourceCloudSigma({}, distro, paths)
ok = src.get_data()
report(src, ok)
"""


@pytest.mark.parametrize("ctx", [
    CONTEXT,
    {**CONTEXT, "name": "x" * 70, "meta": {"cloudinit-user-data": base64.b64encode(b"#!/bin/sh\necho hi\n").decode(),
                                           "base64_fields": "cloudinit-user-data,other", "ssh_public_key": KEY}},
    {**CONTEXT, "name": "naïve-ünicode", "vendor_data": {}},
], ids=["plain", "base64-long-name", "unicode-name"])
def test_same_as_cloud_init_22_4(target, pty, tmp_path, ctx):
    sigma(target)
    port, _ = pty(ctx)
    ref_port, _ = pty(ctx)
    ds = find_datasource(context(target, port.path), ["CloudSigma"]).datasource
    ref = run_reference(REFERENCE, str(tmp_path), ref_port.path)
    assert ref["ok"] is True
    assert ds.instance_id == ref["instance_id"]
    assert ds.local_hostname == ref["hostname"]
    assert ds.public_keys == ref["keys"]
    assert ds.userdata_raw.decode() == ref["userdata"]
    assert (ds.vendordata_raw.decode() if ds.vendordata_raw else None) == ref["vendordata"]
    assert {k: v for k, v in ds.metadata.items() if k not in ("instance-id", "local-hostname")} == ref["metadata"]
