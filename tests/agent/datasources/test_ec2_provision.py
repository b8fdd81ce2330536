"""The agent's Ec2 datasource provisions a temporary root from ``cloudseed serve`` at 169.254.169.254.

A guest network namespace and a cloud one (tests/agent/datasources/netlab.py); the server runs
in the cloud namespace with the instance registered at the guest's address; ``cloudseed --root
ROOT init`` runs in the guest, with the DMI of an EC2 instance in ROOT.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.agent.datasources.netlab import NetLab, write_tree

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLOUDSEED = os.path.join(REPO, ".venv", "bin", "cloudseed")
INSTANCE = "i-0ec2f00d0000000042"
USER_DATA = "#cloud-config\nwrite_files:\n  - path: /etc/from-ec2\n    content: provisioned\n"


@pytest.fixture
def cloud(tmp_path):
    lab = NetLab()
    try:
        db = tmp_path / "server.db"
        (tmp_path / "ec2.json").write_text(json.dumps({"iam_role": "provision-role", "life_cycle": "spot"}))
        (tmp_path / "user-data").write_text(USER_DATA)
        (tmp_path / "key.pub").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIProvision p@example\n")
        mac = json.loads(lab.guest_exec("ip", "-j", "link", "show", lab.guest_if).stdout)[0]["address"]
        subprocess.run([CLOUDSEED, "instances", "--db", str(db), "add", "--id", INSTANCE, "--hostname", "ec2-guest",
                        "--address", f"{lab.guest_ip}/24", "--mac", mac, "--availability-zone", "ap-south-1c",
                        "--user-data", str(tmp_path / "user-data"), "--ssh-key", str(tmp_path / "key.pub"),
                        "--imds-tokens", "required", "--ec2-json", str(tmp_path / "ec2.json")],
                       check=True, capture_output=True, timeout=60)
        lab.start_in_cloud(CLOUDSEED, "serve", "--db", str(db), "--listen", "169.254.169.254:80")
        for _ in range(100):
            probe = lab.guest_exec("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "1",
                                   "http://169.254.169.254/", check=False)
            if probe.stdout.strip() == "401":  # up, and tokens are required
                break
        lab.root = str(tmp_path / "root")
        lab.mac = mac
        write_tree(lab.root, {
            "sys/class/dmi/id/sys_vendor": "Amazon EC2\n", "etc/os-release": "ID=debian\nVERSION_ID=12\n",
            "etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n",
            "etc/cloudseed/cloud.cfg.d/90-test.cfg": "datasource_list: [Ec2, None]\nssh_genkeytypes: []\n"
                                                     "cloud_init_modules: [write_files]\n"})
        yield lab
    finally:
        lab.close()


def test_ec2_datasource_provisions_a_root_from_our_server(cloud):
    proc = cloud.guest_exec(CLOUDSEED, "--root", cloud.root, "init", check=False, timeout=120)
    root = cloud.root
    iid = os.path.join(root, "var/lib/cloudseed/data/instance-id")
    assert os.path.exists(iid), proc.stderr[-3000:]
    with open(iid) as handle:
        assert handle.read().strip() == INSTANCE
    with open(os.path.join(root, "etc/from-ec2")) as handle:
        assert handle.read() == "provisioned"  # user-data applied
    with open(os.path.join(root, "run/cloudseed/instance-data.json")) as handle:
        data = json.load(handle)
    v1 = data["v1"]
    assert v1["cloud_name"] == "aws" and v1["platform"] == "ec2"
    assert v1["instance_id"] == INSTANCE and v1["local_hostname"] == "ec2-guest"
    assert v1["region"] == "ap-south-1" and v1["availability_zone"] == "ap-south-1c"
    assert json.dumps(data).count('"spot"') >= 1, data.get("ds")  # instance-life-cycle, from the crawl
    # the signed identity, read as cloud-init 22.4 reads it, so `query ds.dynamic.instance-identity.pkcs7` works
    identity = data["ds"]["dynamic"]["instance-identity"]
    assert identity["document"]["instanceId"] == INSTANCE
    assert identity["pkcs7"].startswith("MII") and identity["rsa2048"].startswith("MII") and identity["signature"]
    # the role's temporary credentials are never fetched, so never written anywhere in the root
    for top, _dirs, files in os.walk(root):
        for name in files:
            if os.path.islink(os.path.join(top, name)):
                continue
            with open(os.path.join(top, name), "rb") as handle:
                assert b"AccessKeyId" not in handle.read(), os.path.join(top, name)
