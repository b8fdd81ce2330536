"""cloudbase-init's own metadata services (EC2, GCE, Oracle Cloud, OpenStack HTTP, CloudStack, MAAS,
Azure) as real clients of ``cloudseed serve`` in a guest network namespace.

cloudbase-init (the ``cloudbase-init`` package from PyPI, 1.1.9, in its own venv:
``$CLOUDSEED_CBI_VENV``, default ``~/.cache/cloudseed-cbi-venv``; ``scripts/setup.sh`` installs it,
and the first test installs it when it is missing) runs ``cloudbase_init_client.py`` with
``ip netns exec``: its service classes, unchanged, reach the emulation at 169.254.169.254,
metadata.google.internal and, for Azure, the wire server at 168.63.129.16. Only OS-level Windows
parts are replaced (listed in that file). The tests are skipped, saying why, only when the package
cannot be installed.

Not run here: cloudbase-init's config-drive, NoCloud, OVF and VMware guestinfo services (they find
their data through the Windows osutils: drive letters, WMI, the VMware tools) and Packet's (not
emulated). CloudStack's and MAAS's are told the emulation's address as an operator does
(``metadata_base_url`` in cloudbase-init.conf; MAAS's OAuth keys too).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.provider.server.cloud_reference import CloudNamespaces
from tests.provider.server.server_support import ROOT

pytestmark = [pytest.mark.root]

CBI_PACKAGE = "cloudbase-init==1.1.9"
VENV = os.environ.get("CLOUDSEED_CBI_VENV") or os.path.expanduser("~/.cache/cloudseed-cbi-venv")
CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cloudbase_init_client.py")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3cbiKeyForTests alice@example"
OTHER_KEY = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCbiOther bob@example"
USER_DATA = "#ps1_sysnative\nWrite-Output 'from cloudseed'\n"
WIRE_VERSIONS_PATH = "/?comp=versions"


@functools.cache
def cbi_python() -> tuple[str | None, str]:
    """(the venv's python, "") when cloudbase-init imports there, else (None, why not)."""
    python = os.path.join(VENV, "bin", "python")
    check = [python, "-c", "import cloudbaseinit.metadata.services.ec2service"]
    if os.path.exists(python) and subprocess.run(check, capture_output=True).returncode == 0:
        return python, ""
    try:
        if not os.path.exists(python):
            made = subprocess.run([sys.executable, "-m", "venv", VENV], capture_output=True, text=True, timeout=120)
            if made.returncode != 0:
                return None, f"python -m venv {VENV}: {made.stderr.strip()[-300:]}"
        installed = subprocess.run([python, "-m", "pip", "install", "-q", CBI_PACKAGE], capture_output=True,
                                   text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"installing {CBI_PACKAGE}: {e}"
    if installed.returncode != 0:
        return None, f"pip install {CBI_PACKAGE} failed: {installed.stderr.strip()[-300:]}"
    if subprocess.run(check, capture_output=True).returncode != 0:
        return None, f"{CBI_PACKAGE} installed in {VENV} but does not import"
    return python, ""


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    python, why = cbi_python()
    if python is None:
        pytest.skip(f"cloudbase-init cannot be installed here: {why}")
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("cbi") / "server.db"),
                            str(tmp_path_factory.mktemp("cbi-server")), extra_addresses=("168.63.129.16",),
                            serve_extra=("--password-server-listen", "169.254.169.254:8080"))
    cloud.python = python
    yield cloud
    cloud.close()


def place(cloud, instance_id: str, **fields) -> None:
    """The guest's address belongs to this instance alone (the previous test's is removed)."""
    for old in getattr(cloud, "placed", []):
        cloud.server.admin("DELETE", f"/v1/instances/{old}")
    cloud.placed = [instance_id]
    cloud.server.add(instance_id=instance_id,
                     addresses=[{"address": cloud.guest_ip, "network": "default", "mac": cloud.mac, "prefix": 24}],
                     **fields)


def run_service(cloud, service: str, media: str | None = None, conf: dict | None = None) -> dict:
    argv = ["ip", "netns", "exec", cloud.gst, cloud.python, CLIENT, service] + ([media] if media else [])
    env = {**os.environ, "CBI_CONF": json.dumps(conf or {})}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["log"] = proc.stderr
    return out


def value(out: dict, key: str):
    assert "error" not in out[key], (key, out[key], out["log"][-3000:])
    return out[key]["value"]


def test_ec2_service_reads_the_emulation(cloud):
    place(cloud, "i-0cb1c0ffee0000001", hostname="cbi-ec2.example.test", ssh_keys=[{"name": "alice", "data": KEY}],
          user_data=USER_DATA)
    out = run_service(cloud, "ec2")
    assert out["loaded"] is True
    assert value(out, "instance_id") == "i-0cb1c0ffee0000001"
    assert value(out, "host_name") == "cbi-ec2.example.test"
    assert value(out, "public_keys") == [KEY]
    assert value(out, "user_data") == USER_DATA


def test_ec2_service_without_imds_v2_is_refused_where_tokens_are_required(cloud):
    """cloudbase-init 1.1.9's EC2Service never asks for an IMDSv2 token: an instance that requires
    them (``--imds-tokens required``) answers it 401, as EC2 does, and the service does not load."""
    place(cloud, "i-0cb1c0ffee0000002", hostname="cbi-v2", user_data=USER_DATA, imds_tokens="required")
    out = run_service(cloud, "ec2")
    assert out["loaded"] is False
    assert "401" in out["instance_id"]["error"]


def test_gce_service_reads_the_emulation(cloud):
    # cloudbase-init takes only keys whose user (both the prefix and the key's comment) is its
    # configured user, "Admin" by default; project keys unless blocked
    attributes = {"ssh-keys": f"Admin:{KEY.rsplit(' ', 1)[0]} Admin\nalice:{KEY}"}
    place(cloud, "cbi-gce-vm", hostname="cbi-gce", user_data=USER_DATA,
          clouds={"gce": {"numeric_id": 4242424242, "attributes": attributes,
                          "project_attributes": {"ssh-keys": f"Admin:{OTHER_KEY.rsplit(' ', 1)[0]} Admin"}}})
    out = run_service(cloud, "gce")
    assert out["loaded"] is True
    assert value(out, "instance_id") == "4242424242"
    assert value(out, "host_name") == "cbi-gce"
    assert value(out, "user_data") == USER_DATA
    assert value(out, "public_keys") == [f"{KEY.rsplit(' ', 1)[0]} Admin", f"{OTHER_KEY.rsplit(' ', 1)[0]} Admin"]
    attributes["block-project-ssh-keys"] = "true"
    place(cloud, "cbi-gce-vm2", hostname="cbi-gce", user_data=USER_DATA,
          clouds={"gce": {"attributes": attributes,
                          "project_attributes": {"ssh-keys": f"Admin:{OTHER_KEY.rsplit(' ', 1)[0]} Admin"}}})
    assert value(run_service(cloud, "gce"), "public_keys") == [f"{KEY.rsplit(' ', 1)[0]} Admin"]


def test_oracle_service_reads_the_emulation(cloud):
    place(cloud, "ocid1.instance.oc1.phx.cbitest", hostname="cbi-oci", user_data=USER_DATA,
          ssh_keys=[{"name": "alice", "data": KEY}])
    out = run_service(cloud, "oracle")
    assert out["loaded"] is True
    assert value(out, "instance_id") == "ocid1.instance.oc1.phx.cbitest"
    assert value(out, "host_name") == "cbi-oci"
    assert value(out, "user_data") == USER_DATA  # served base64 in metadata.user_data, decoded by the client
    # OracleCloudService 1.1.9 has no get_public_keys of its own (the base class's None)
    assert value(out, "public_keys") is None


def test_openstack_http_service_reads_the_emulation(cloud):
    place(cloud, "0b7c1c2e-4d6f-4e8a-9b1c-2d3e4f5a6b7c", hostname="cbi-os", user_data=USER_DATA,
          ssh_keys=[{"name": "alice", "data": KEY}])
    out = run_service(cloud, "openstack")
    assert out["loaded"] is True
    assert value(out, "instance_id") == "0b7c1c2e-4d6f-4e8a-9b1c-2d3e4f5a6b7c"
    assert value(out, "host_name") == "cbi-os"
    assert value(out, "public_keys") == [KEY]
    assert value(out, "user_data") == USER_DATA
    network = out["network"]
    assert [link["mac"] for link in network["links"]] == [cloud.mac]
    assert [n["address"] for n in network["networks"]] == [f"{cloud.guest_ip}/24"]


def test_cloudstack_service_reads_the_emulation_and_the_password_server(cloud):
    # cloudbase-init looks at metadata_base_url (default the router 10.1.1.1), then the DHCP
    # servers in use (Windows osutils); here the operator's setting names the emulation's address
    place(cloud, "cbi-cs-vm-1", hostname="cbi-cs", user_data=USER_DATA, password="Cs-pass.42",
          ssh_keys=[{"name": "alice", "data": KEY}, {"name": "bob", "data": OTHER_KEY}],
          clouds={"cloudstack": {"service_offering": "small-1"}})
    out = run_service(cloud, "cloudstack", conf={"cloudstack.metadata_base_url": "http://169.254.169.254/"})
    assert out["loaded"] is True
    assert value(out, "instance_id") == "cbi-cs-vm-1"
    assert value(out, "host_name") == "cbi-cs"
    assert value(out, "public_keys") == [KEY, OTHER_KEY]
    assert value(out, "user_data") == USER_DATA
    # send_my_password, then saved_password: served once, as CloudStack's router does
    assert value(out, "admin_password") == "Cs-pass.42"
    assert value(out, "admin_password_again") is None


def test_maas_service_reads_the_emulation_with_oauth(cloud):
    keys = {"consumer_key": "cbiConsumer", "token_key": "cbiToken", "token_secret": "cbiSecret"}
    place(cloud, "cbi-maas-node", hostname="cbi-maas", user_data=USER_DATA,
          ssh_keys=[{"name": "alice", "data": KEY}], clouds={"maas": keys})
    conf = {"maas.metadata_base_url": "http://169.254.169.254/MAAS/metadata/",
            "maas.oauth_consumer_key": "cbiConsumer", "maas.oauth_token_key": "cbiToken",
            "maas.oauth_token_secret": "cbiSecret"}
    out = run_service(cloud, "maas", conf=conf)
    assert out["loaded"] is True
    assert value(out, "instance_id") == "cbi-maas-node"
    assert value(out, "host_name") == "cbi-maas"
    assert value(out, "public_keys") == [KEY]
    assert value(out, "user_data") == USER_DATA
    wrong = run_service(cloud, "maas", conf={**conf, "maas.oauth_token_secret": "wrong"})
    assert wrong["loaded"] is False and "401" in wrong["instance_id"]["error"]


def _show(cloud, instance_id: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", cloud.server.db_url, "show",
                           instance_id], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _media(cloud, instance_id: str, directory) -> str:
    """The provisioning ISO from ``seed build --kind azure``, unpacked by xorriso (not by our reader)."""
    if not shutil.which("xorriso"):
        pytest.skip("xorriso is not installed (scripts/setup.sh)")
    iso = str(directory / "ovf.iso")
    build = subprocess.run([sys.executable, "-m", "cloudseed", "seed", "build", "--kind", "azure", "--db",
                            cloud.server.db_url, "--instance", instance_id, "-o", iso],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert build.returncode == 0, build.stderr
    media = directory / "drive"
    unpacked = subprocess.run(["xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/", str(media)],
                              capture_output=True, text=True, timeout=60)
    assert unpacked.returncode == 0, unpacked.stderr
    return str(media)


def test_azure_service_windows_provisioning_and_ready(cloud, tmp_path):
    iid = "7d3c0e52-1b2a-4c3d-8e4f-5a6b7c8d9e0f"
    place(cloud, iid, hostname="cbiwin", user_data=USER_DATA,
          clouds={"azure": {"os_type": "windows", "admin_username": "winadmin", "admin_password": "Pa55-word.1"}})
    media = _media(cloud, iid, tmp_path)
    out = run_service(cloud, "azure", media)
    assert out["base_url"] == "http://168.63.129.16"  # its own fallback: DHCP option 245 is Windows-only
    assert out["loaded"] is True, out["log"][-3000:]  # /?comp=versions, then the media's ovf-env.xml
    assert value(out, "instance_id") == f"{iid}.cbiwin"  # the goal state's role instance
    assert value(out, "admin_username") == "winadmin"
    assert value(out, "admin_password") == "Pa55-word.1"
    assert value(out, "host_name") == "cbiwin"
    assert value(out, "user_data") == USER_DATA  # CustomData.bin on the drive
    value(out, "started")
    value(out, "completed")
    health = _show(cloud, iid)["azure_health"]
    assert health["state"] == "Ready" and health["instance"] == f"{iid}.cbiwin"
    posts = subprocess.run([sys.executable, "-c", (
        "import json,sys; from cloudseed.provider.registry import open_registry; r = open_registry(sys.argv[1]); "
        "print(json.dumps([p['fields']['azure_health'] for p in r.phone_home(sys.argv[2]) "
        "if 'azure_health' in p['fields']]))"), cloud.server.db_url, iid],
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert posts.returncode == 0, posts.stderr
    states = [(p["state"], p["substatus"]) for p in json.loads(posts.stdout)]
    assert states == [("NotReady", "Provisioning"), ("Ready", "")]


def test_azure_service_on_linux_media_finds_no_windows_drive(cloud, tmp_path):
    """The default (Linux) provisioning media has no Windows drive tag: cloudbase-init, a Windows
    agent, does not take it for its drive, while the wire server part still answers it."""
    iid = "8e4d1f63-2c3b-4d4e-9f50-6b7c8d9e0f1a"
    place(cloud, iid, hostname="cbilinux", user_data=USER_DATA)
    out = run_service(cloud, "azure", _media(cloud, iid, tmp_path))
    assert out["loaded"] is False
    assert "E6DA6616-8EC4-48E0-BE93-58CE6ACE3CFB.tag" in out["host_name"]["error"]
    assert value(out, "instance_id") == f"{iid}.cbilinux"


def test_the_wire_server_lists_its_versions_without_a_version_header(cloud):
    """``/?comp=versions`` is Azure's; a plain ``/`` stays the EC2 version list, either order."""
    place(cloud, "9f5e2a74-3d4c-4e5f-a061-7c8d9e0f1a2b", hostname="cbi-v")
    probe = ("import sys, urllib.request\n"
             "for path in sys.argv[1:]:\n"
             "    print(urllib.request.urlopen('http://168.63.129.16' + path, timeout=10).read().decode()"
             ".replace(chr(10), ' '))\n")
    proc = subprocess.run(["ip", "netns", "exec", cloud.gst, sys.executable, "-c", probe, "/", WIRE_VERSIONS_PATH,
                           "/", WIRE_VERSIONS_PATH], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    first, versions, again, versions_again = proc.stdout.splitlines()
    assert "latest" in first and first == again
    assert "<Versions>" in versions and "<Version>2015-04-05</Version>" in versions and versions == versions_again
