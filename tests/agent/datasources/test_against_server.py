"""The OpenStack, Ec2 and NoCloud datasources as clients of our own metadata server (``cloudseed serve``)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.agent.datasources.netlab import NetLab, find_in_guest, write_tree

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLOUDSEED = os.path.join(REPO, ".venv", "bin", "cloudseed")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIServerKey guest@example"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("server")
    lab = NetLab()
    db = tmp / "server.db"
    (tmp / "key.pub").write_text(KEY + "\n")
    (tmp / "user-data").write_text("#cloud-config\nhostname: served\n")
    proc = subprocess.run([CLOUDSEED, "instances", "--db", str(db), "add",
                           "--id", "4f6c2d1e-0000-4000-8000-00000000abcd", "--hostname", "served-host",
                           "--address", lab.guest_ip, "--ssh-key", str(tmp / "key.pub"),
                           "--user-data", str(tmp / "user-data"), "--availability-zone", "zone-7"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        lab.close()
        pytest.fail(f"cloudseed instances add failed: {proc.stderr.strip()[-300:]}")
    server = subprocess.Popen(["ip", "netns", "exec", lab.cloud, CLOUDSEED, "serve", "--db", str(db),
                               "--listen", "169.254.169.254:80", "--listen", "[fd00:ec2::254]:80"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lab.procs.append(server)
    for _ in range(100):  # wait until it answers
        probe = lab.guest_exec("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "1",
                               "http://169.254.169.254/openstack", check=False)
        if probe.stdout.strip() == "200":
            break
        if server.poll() is not None:
            lab.close()
            pytest.fail(f"cloudseed serve exited: {server.stderr.read()[-300:]}")
    root = tmp / "root"
    write_tree(root, {"sys/class/dmi/id/product_name": "OpenStack Nova\n",
                      "sys/class/dmi/id/sys_vendor": "Amazon EC2\n"})
    lab.root = str(root)
    yield lab
    lab.close()


def test_openstack_from_our_server(cloud):
    out = find_in_guest(cloud, cloud.root, ["OpenStack"])
    ds = out["ds"]
    assert ds is not None, out["_stderr"]
    assert ds["metadata"]["instance-id"] == "4f6c2d1e-0000-4000-8000-00000000abcd"
    assert ds["metadata"]["local-hostname"].startswith("served-host")
    assert KEY in ds["public_keys"]
    assert ds["userdata_raw"] == "#cloud-config\nhostname: served\n"
    assert ds["availability_zone"] == "zone-7"


def test_ec2_from_our_server(cloud):
    out = find_in_guest(cloud, cloud.root, ["Ec2"])
    ds = out["ds"]
    assert ds is not None, out["_stderr"]
    assert out["imds"] == "v2"
    assert ds["metadata"]["instance-id"] == "4f6c2d1e-0000-4000-8000-00000000abcd"
    assert ds["public_keys"] == [KEY]
    assert ds["userdata_raw"] == "#cloud-config\nhostname: served\n"
    assert ds["availability_zone"] == "zone-7"


def test_nocloud_net_from_our_server(cloud):
    listing = cloud.guest_exec("curl", "-s", "-m", "2", "-o", "/dev/null", "-w", "%{http_code}",
                               "http://169.254.169.254/nocloud/meta-data", check=False).stdout.strip()
    assert listing == "200", f"the server does not publish NoCloud at /nocloud/ (HTTP {listing})"
    cfg = {"datasource": {"NoCloud": {"seedfrom": "http://169.254.169.254/nocloud/", "fs_label": None}}}
    out = find_in_guest(cloud, cloud.root, ["NoCloud"], cfg=cfg)
    ds = out["ds"]
    assert ds is not None, out["_stderr"]
    assert ds["metadata"]["instance-id"] == "4f6c2d1e-0000-4000-8000-00000000abcd"
    assert ds["userdata_raw"] == "#cloud-config\nhostname: served\n"
