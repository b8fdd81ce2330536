"""Signed user-data through the network: the agent in a guest namespace, ``cloudseed serve`` in the cloud
namespace at 169.254.169.254, an image that requires signed user-data.

OpenStack and EC2 (the datasources that read ``user_data.sig``/``user-data.sig`` beside the data):
with the registry's key trusted the user-data is applied; with another key trusted, the same
answer is refused and the boot says why. (Every API serving the signature is checked in
``tests/provider/server/test_signed_userdata_api.py``.)
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from cloudlab import AGENT_CFG, CLOUDSEED, PYTHON, CloudLab, DebianRoot
from netlab import write_tree

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-signed-user-data, content: seen}\n"
IID = "i-0signed0000000001"
DMI = {"openstack": {"product_name": "OpenStack Nova", "sys_vendor": "OpenStack Foundation"},
       "ec2": {"sys_vendor": "Amazon EC2", "product_uuid": "ec2a1b2c-0000-0000-0000-000000000001"}}
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFxUb2ucdAlOtSz8xhq4hEx2SCJkATUwXPS8Zb9zmH5f someone-else"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    tmp = str(tmp_path_factory.mktemp("signed"))
    lab = CloudLab(tmp, IID, {}, USER_DATA)
    key = subprocess.run([CLOUDSEED, "userdata", "key", "--db", os.path.join(tmp, "server.db")],
                         capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    yield lab, key
    lab.close()


@pytest.mark.parametrize("kind", ["openstack", "ec2"])
def test_required_signature_from_the_registry_is_checked_through_the_api(cloud, kind):
    lab, key = cloud
    names = {"openstack": "OpenStack", "ec2": "Ec2"}
    for trusted, applied in ((key, True), (OTHER_KEY, False)):
        cfg = (f"datasource_list: [{names[kind]}]\nnetwork: {{config: disabled}}\nrequire_signed_userdata: true\n"
               f"trusted_userdata_keys: [{json.dumps(trusted)}]\n")
        root = DebianRoot()
        try:
            write_tree(root.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI[kind].items()})
            write_tree(root.top, {"etc/cloudseed/cloud.cfg.d/90-signed.cfg": AGENT_CFG + cfg})
            for stage in (["init", "--local"], ["init"]):
                proc = lab.lab.guest_exec(PYTHON, "-m", "cloudseed", "--root", root.top, *stage, check=False,
                                          timeout=120)
                assert "Traceback" not in proc.stderr, proc.stderr
            data = json.loads(root.read("/run/cloudseed/instance-data.json"))
            assert data["v1"]["instance_id"] == IID
            status = json.loads(root.read("/run/cloudseed/status.json"))["v1"]["init"]
            assert os.path.exists(os.path.join(root.top, "etc/from-signed-user-data")) == applied, status
            if applied:
                assert status["errors"] == []
            else:
                assert any("user-data not applied: its signature does not verify" in e for e in status["errors"])
        finally:
            root.close()
