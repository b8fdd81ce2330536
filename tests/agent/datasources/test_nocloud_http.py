"""NoCloud over HTTP (``ds=nocloud;s=http://...`` and ``seedfrom``) from a server in another namespace."""

from __future__ import annotations

import json
import os

import pytest

from tests.agent.datasources.netlab import PYTHON, REPO, NetLab, find_in_guest, write_tree

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


@pytest.fixture
def lab(tmp_path):
    lab = NetLab()
    lab.tmp = tmp_path
    write_tree(tmp_path / "tree", {
        "seed/meta-data": "instance-id: nc-http-1\nlocal-hostname: nc-host\n",
        "seed/user-data": "#cloud-config\nruncmd: [true]\n",
        "seed/vendor-data": "#cloud-config\nvendor: yes\n",
        "seed/network-config": "version: 2\nethernets: {eth0: {dhcp4: true}}\n",
        "partial/meta-data": "instance-id: nc-partial\n",
        "partial/user-data": "#cloud-config\n{}\n",
    })
    (tmp_path / "rules.json").write_text(json.dumps({
        "/partial/vendor-data": {"slowloris": 60},
        "/partial/network-config": {"status": 500},
    }))
    lab.start_in_cloud(PYTHON, os.path.join(REPO, "tests/agent/datasources/mdserver.py"), "--tree",
                       str(tmp_path / "tree"), "--rules", str(tmp_path / "rules.json"),
                       "--listen", f"{lab.cloud_ip}:8000", ready="ready")
    yield lab
    lab.close()


@pytest.mark.parametrize("how", ["cmdline", "config"])
def test_seed_url(lab, how):
    url = f"http://{lab.cloud_ip}:8000/seed/"
    section = {"fs_label": None}
    if how == "config":
        section["seedfrom"] = url
    cmdline = f"quiet ds=nocloud-net;s={url}" if how == "cmdline" else "quiet"
    out = find_in_guest(lab, str(lab.tmp), ["NoCloud"], cfg={"datasource": {"NoCloud": section}}, cmdline=cmdline)
    ds = out["ds"]
    assert ds is not None, out["_stderr"]
    assert ds["metadata"]["instance-id"] == "nc-http-1"
    assert ds["userdata_raw"] == "#cloud-config\nruncmd: [true]\n"
    assert ds["vendordata_raw"] == "#cloud-config\nvendor: yes\n"
    assert ds["network_config"] == {"version": 2, "ethernets": {"eth0": {"dhcp4": True}}}


def test_hostile_optional_files_are_bounded(lab):
    url = f"http://{lab.cloud_ip}:8000/partial/"
    cfg = {"datasource": {"NoCloud": {"seedfrom": url, "fs_label": None, "timeout": 1, "retries": 1,
                                      "max_wait": 4}}}
    out = find_in_guest(lab, str(lab.tmp), ["NoCloud"], cfg=cfg)
    ds = out["ds"]
    assert ds is not None, out["_stderr"]
    assert ds["metadata"]["instance-id"] == "nc-partial"
    assert ds["vendordata_raw"] is None and ds["network_config"] is None
    assert out["took"] < 5
    assert f"{url}vendor-data: no complete answer within 1s" in out["_stderr"]
    assert f"{url}network-config: HTTP 500" in out["_stderr"]
    assert any("vendor-data" in w for w in out["warnings"])
