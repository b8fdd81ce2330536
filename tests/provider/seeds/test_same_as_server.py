"""A seed built from the registry says what the metadata server says about the same instance
(issue 12 items 9-11): one derivation (``provider/instance_data``) and one version table.

The seed is built by the real ``cloudseed seed build --db`` and read back from the image; the
server's answers come from its own renderers (``apis/openstack.py``, ``nocloud.py``, ``ec2.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from cloudseed.provider.registry import InstanceRecord, open_registry
from cloudseed.provider.server.apis import ec2 as ec2_api
from cloudseed.provider.server.apis import nocloud as nocloud_api
from cloudseed.provider.server.apis import openstack as openstack_api
from tests.provider.seeds.images import KEY, extract, tree

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _record() -> InstanceRecord:
    return InstanceRecord(
        instance_id="i-same-1", hostname="same1", macs=["52:54:00:00:00:01", "52:54:00:00:00:02"],
        addresses=[{"address": "10.0.0.9", "network": "net-a", "prefix": 24},
                   {"address": "10.1.0.9", "network": "net-b", "mac": "52:54:00:00:00:02"}],
        ssh_keys=[{"name": "lab", "data": KEY}], user_data=b"#cloud-config\n", vendor_data="#cloud-config\n",
        tags={"env": "test"}, meta={"role": "web"}, project_id="p1")


def _seed(tmp_path, kind: str) -> dict[str, bytes]:
    db = str(tmp_path / "reg.db")
    with open_registry(db) as registry:
        registry.add(_record())
    out = str(tmp_path / f"{kind}.iso")
    subprocess.run([sys.executable, "-m", "cloudseed", "seed", "build", "--kind", kind, "--db", db,
                    "--instance", "i-same-1", "-o", out], cwd=ROOT, check=True, capture_output=True, timeout=60)
    return tree(extract(out, "iso9660", str(tmp_path / kind)))


def _served(record: InstanceRecord, version: str, name: str) -> object:
    answer = openstack_api.render(record, version, name)
    response = answer() if callable(answer) else answer
    return json.loads(response.body) if response is not None else None


def test_config_drive_from_the_registry_publishes_what_the_server_does(tmp_path):
    files = _seed(tmp_path, "configdrive")
    record = _record()
    record.validate()
    network = json.loads(files["openstack/latest/network_data.json"])
    assert network["links"], "network_data.json derived from MACs and addresses, not empty"
    assert network == _served(record, "latest", "network_data.json")
    for version in (*openstack_api.OPENSTACK_VERSIONS, "latest"):
        served = _served(record, version, "meta_data.json")
        served.pop("random_seed", None)  # fresh per request on the server; a seed image is reproducible
        assert json.loads(files[f"openstack/{version}/meta_data.json"]) == served, version
        for name in ("vendor_data.json", "vendor_data2.json", "network_data.json"):
            written = files.get(f"openstack/{version}/{name}")
            assert (json.loads(written) if written is not None else None) == _served(record, version, name), \
                (version, name)
    ec2 = json.loads(files["ec2/latest/meta-data.json"])
    assert ec2 == ec2_api.meta_data_tree(record, ec2_api.LATEST)
    assert ec2["tags"]["instance"] == {"env": "test"}


def test_one_version_table(tmp_path):
    files = _seed(tmp_path, "configdrive")
    versions = sorted({path.split("/")[1] for path in files if path.startswith("openstack/")})
    assert versions == sorted((*openstack_api.OPENSTACK_VERSIONS, "latest"))
    assert "2020-10-14" in versions
    assert "openstack/2013-04-04/vendor_data.json" not in files  # Nova: from 2013-10-17, like the server
    assert "openstack/2013-10-17/vendor_data.json" in files
    assert not any(path.endswith("/password") for path in files)  # the password API is served only
    latest = json.loads(files["openstack/2020-10-14/meta_data.json"])
    assert latest["dedicated_cpus"] == [] and "dedicated_cpus" not in json.loads(
        files["openstack/2018-08-27/meta_data.json"])
    assert latest["keys"] == [{"name": "lab", "type": "ssh", "data": KEY}]  # Nova's key type, not the algorithm


def test_nocloud_seed_from_the_registry_publishes_what_the_server_does(tmp_path):
    files = _seed(tmp_path, "nocloud")
    record = _record()
    record.validate()
    for name in ("meta-data", "network-config"):
        assert yaml.safe_load(files[name]) == yaml.safe_load(nocloud_api.render(record, name).body), name
    assert files["vendor-data"] == nocloud_api.render(record, "vendor-data").body
    assert files["user-data"] == b"#cloud-config\n"
