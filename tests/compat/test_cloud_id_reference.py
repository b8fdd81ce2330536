"""``cloud-id`` against cloud-init 26.x: the same instance data gives the same answer, plain, ``--long``
and ``--json``, on a corpus of clouds, partitions, regions and platforms (inputs of our own).

cloud-init's ``handle_args`` runs in one reference process over every file, its status check
answered "done"; ours runs the command with the status check answered the same way (the status
codes themselves are tested in ``test_cloud_init_command.py``).
"""

from __future__ import annotations

import json

import pytest

from cloudseed.cli import main
from tests.reference import NEW

CASES = [
    ("aws", "us-east-1", "ec2"), ("aws", "cn-north-1", "ec2"), ("aws", "cn-northwest-1", "ec2"),
    ("aws", "us-gov-west-1", "ec2"), ("aws", "eu-central-1", "ec2"), ("aws", "unknown", "ec2"),
    ("aws", None, "ec2"), ("azure", "eastus", "azure"), ("azure", "chinaeast2", "azure"),
    ("azure", "usgovvirginia", "azure"), ("azure", "usgov", "azure"), ("azure", "unknown", "azure"),
    ("gce", "us-central1", "gce"), ("openstack", "RegionOne", "openstack"), ("openstack", "unknown", "openstack"),
    ("nocloud", "unknown", "nocloud"), ("unknown", "unknown", "nocloud"), ("unknown", "cn-north-1", "ec2"),
    ("unknown", "us-gov-east-1", "ec2"), (None, None, "lxd"), ("", "", "vmware"), ("oracle", "us-ashburn-1", "oracle"),
    ("hetzner", "unknown", "hetzner"), ("digitalocean", "nyc3", "digitalocean"), ("lxd", "unknown", "lxd"),
    ("AWS", "cn-north-1", "ec2"), ("Azure", "chinanorth", "azure"), ("aws", "CN-north-1", "ec2"),
    ("vultr", "ams", "vultr"), ("scaleway", "fr-par-1", "scaleway"), ("ibmcloud", "unknown", "ibmcloud"),
    ("cloudstack", "unknown", "cloudstack"), ("aliyun", "cn-hangzhou", "aliyun"), ("akamai", "us-east", "akamai"),
]
MODES = ([], ["--long"], ["--json"])

_THEIRS = r"""
import contextlib, io, json, sys
from types import SimpleNamespace
from cloudinit.cmd import cloud_id
from cloudinit.cmd.status import RunningStatus
cloud_id.get_status_details = lambda *a, **k: SimpleNamespace(running_status=RunningStatus.DONE)
out = []
for path in sys.argv[1:]:
    for mode in ("plain", "long", "json"):
        args = SimpleNamespace(json=mode == "json", long=mode == "long", instance_data=path)
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(io.StringIO()):
            code = cloud_id.handle_args("cloud-id", args)
        out.append([code, buffer.getvalue()])
print(json.dumps(out))
"""


def _instance_data(cloud_name, region, platform) -> dict:
    v1 = {"platform": platform, "instance_id": "i-1", "local_hostname": "h", "subplatform": "metadata (x)"}
    if cloud_name is not None:
        v1["cloud_name"] = cloud_name
    if region is not None:
        v1["region"] = region
    return {"v1": v1}


@pytest.mark.reference
def test_cloud_id_agrees_with_cloud_init_26(tmp_path, monkeypatch, capsys):
    import cloudseed.commands.status as status

    files = []
    for i, case in enumerate(CASES):
        path = tmp_path / f"instance-data-{i}.json"
        path.write_text(json.dumps(_instance_data(*case)))
        files.append(str(path))
    theirs = json.loads(NEW.python(_THEIRS, *files).stdout)
    monkeypatch.setattr(status, "_summary", lambda root, paths: {"status": "done"})
    ours, differ = [], []
    for path in files:
        for mode in MODES:
            code = main(["--root", str(tmp_path), "cloud-id", "-i", path, *mode])
            ours.append([code, capsys.readouterr().out])
    for (case, mode), mine, their in zip([(c, m) for c in CASES for m in MODES], ours, theirs):
        if mine != their:
            differ.append((case, mode, mine, their))
    assert len(ours) == len(theirs) == 3 * len(CASES) >= 100
    assert differ == [], "\n".join(repr(d)[:300] for d in differ)
