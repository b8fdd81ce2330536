"""The GCE datasource: detection from DMI, and a boot against ``cloudseed serve``'s GCE emulation.

The guest namespace reaches the server at 169.254.169.254 (and as ``metadata.google.internal``
through the namespace's hosts file); the agent's local and network stages provision a Debian
root: hostname, the default user with the keys GCE's rules allow, user-data, network config,
instance data.
"""

from __future__ import annotations

import os

import pytest

from cloudseed.agent.datasources import DatasourceContext
from cloudseed.agent.datasources.gce import GCE, public_keys
from cloudseed.agent.state import Paths
from tests.agent.datasources.cloudlab import KEY, OTHER_KEY, PROJECT_KEY, CloudLab, generators, provision
from tests.agent.datasources.netlab import find_in_guest, write_tree

OTHER_USER_KEY = OTHER_KEY
USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-gce-user-data, content: seen}\n"
IID = "7034917263518"
DMI = {"product_name": "Google Compute Engine", "bios_vendor": "Google", "sys_vendor": "Google"}


def context(target, stage="network") -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage=stage)


@pytest.mark.parametrize("facts,found", [
    ({"product_name": "Google Compute Engine"}, "product_name"),
    ({"product_name": "Google"}, "product_name"),
    ({"bios_vendor": "Google"}, "bios_vendor"),
    ({"product_serial": "GoogleCloud-1234ABCD"}, "product_serial"),
    ({"product_name": "OpenStack Nova"}, None),
    ({"sys_vendor": "DigitalOcean"}, None),
    ({}, None),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    reason = GCE.why(context(target))
    assert (reason is None) if found is None else (found in reason)


def test_not_gce_costs_nothing(target):
    """Where DMI says nothing of Google the datasource is not tried: no request, no wait."""
    from cloudseed.agent.datasources import find_datasource

    search = find_datasource(context(target), ["GCE"])
    assert search.tried == [] and search.datasource is None


def test_key_rules_as_cloud_init():
    instance = {"ssh-keys": f"cloudinit:{KEY}\nother:{OTHER_USER_KEY}\ndebian:ssh-rsa AAAAdebian d"}
    project = {"ssh-keys": f"cloudinit:{PROJECT_KEY}"}
    assert public_keys(instance, project, ("cloudinit",)) == [KEY, PROJECT_KEY]
    assert public_keys(instance, project, ("cloudinit", "debian")) == [KEY, "ssh-rsa AAAAdebian d", PROJECT_KEY]
    blocked = {**instance, "block-project-ssh-keys": "TRUE"}
    assert public_keys(blocked, project, ("cloudinit",)) == [KEY]
    legacy = {"sshKeys": f"cloudinit:{KEY}"}  # the legacy instance key blocks the project's too
    assert public_keys(legacy, project, ("cloudinit",)) == [KEY]
    expired = ('cloudinit:ssh-rsa AAAAexp google-ssh {"userName":"a","expireOn":"2001-01-01T00:00:00+0000"}')
    assert public_keys({"ssh-keys": expired}, {}, ("cloudinit",)) == []


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    clouds = {"gce": {"project_id": "lab-project", "numeric_id": int(IID),
                      "attributes": {"enable-oslogin": "FALSE", "startup-script": "echo hi",
                                     "ssh-keys": f"cloudinit:{KEY}\nother:{OTHER_USER_KEY}"},
                      "project_attributes": {"ssh-keys": f"cloudinit:{PROJECT_KEY}"}}}
    lab = CloudLab(str(tmp_path_factory.mktemp("gce")), IID, clouds, USER_DATA,
                   hosts="169.254.169.254 metadata.google.internal\n")
    yield lab
    lab.close()


def test_found_at_metadata_google_internal(cloud, tmp_path):
    write_tree(tmp_path, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI.items()})
    cfg = {"datasource": {"GCE": {"metadata_url": "http://metadata.google.internal/computeMetadata/v1/"}}}
    out = find_in_guest(cloud.lab, str(tmp_path), ["GCE"], cfg=cfg)
    ds = out["ds"]
    assert ds is not None, out["_stderr"][-3000:]
    assert out["address"] == "http://metadata.google.internal/computeMetadata/v1/"
    assert ds["metadata"]["instance-id"] == IID and ds["metadata"]["local-hostname"] == "lab-vm"
    assert ds["public_keys"] == [KEY, PROJECT_KEY]
    assert ds["userdata_raw"] == USER_DATA
    assert ds["availability_zone"] == "zone-a-1" and ds["region"] == "zone-a"


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        assert data["v1"]["cloud_name"] == "gce" and data["v1"]["platform"] == "gce"
        assert data["v1"]["instance_id"] == IID and data["v1"]["local_hostname"] == "lab-vm"
        assert data["v1"]["region"] == "zone-a" and data["v1"]["availability_zone"] == "zone-a-1"
        assert data["v1"]["public_ssh_keys"] == [KEY, PROJECT_KEY]
        assert root.read("/etc/hostname").strip() == "lab-vm"
        keys = root.read("/home/debian/.ssh/authorized_keys")
        assert KEY in keys and PROJECT_KEY in keys and OTHER_USER_KEY not in keys
        assert root.read("/etc/from-gce-user-data") == "seen"
        rendered = "".join(text for d, _, files in os.walk(root.top + "/etc") for f in files
                           if cloud.mac in (text := _safe_read(os.path.join(d, f))))
        assert cloud.mac in rendered and "dhcp" in rendered.lower()
    finally:
        root.close()


def _safe_read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read(65536)
    except OSError:
        return ""


@pytest.mark.parametrize("facts,enabled", [
    ({"product_name": "Google Compute Engine"}, True),
    ({"bios_vendor": "Google"}, True),
    ({"product_name": "Standard PC (Q35 + ICH9, 2009)"}, False),
])
def test_generators_enable_the_agent_on_gce(tmp_path, facts, enabled):
    verdicts = generators(str(tmp_path), facts)
    for kind, verdict in verdicts.items():
        # (a seed device another test attached to this host may enable the agent: not for GCE)
        assert ("GCE (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)
