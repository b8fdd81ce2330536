"""The Akamai (Linode) datasource: detection from DMI, a boot against ``cloudseed serve``'s Akamai
emulation in a guest network namespace (token, instance, ssh-keys, network, base64 user-data),
over IPv6 alone, and hostile services: a silent one, a refused token, a truncated document.

No reference differential: DataSourceAkamai is not in Debian's cloud-init 22.4 (added in 23.4);
the emulation and the datasource follow Akamai's published Metadata service API reference.
"""

from __future__ import annotations

import json
import os

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.akamai import Akamai, settings
from cloudseed.agent.state import Paths
from tests.agent.datasources import cloudlab, netlab
from tests.agent.datasources.cloudlab import KEY, CloudLab, generators, provision
from tests.agent.datasources.netlab import find_against_script, find_in_guest, write_tree

V6 = "fd00:a9fe:a9fe::1"
USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-akamai-user-data, content: seen}\n"
LINODE_ID = "53275497"
DMI = {"sys_vendor": "Linode", "product_name": "Compute Instance", "product_serial": LINODE_ID}
QUICK = {"datasource": {"Akamai": {"max_wait": 1, "timeout": 1, "retries": 0}}}


def context(target, cfg=None) -> DatasourceContext:
    return DatasourceContext(root=target, cfg=cfg or {}, cmdline="", paths=Paths(target), stage="network")


@pytest.mark.parametrize("facts,found", [
    ({"sys_vendor": "Linode"}, True),
    ({"sys_vendor": "Akamai"}, True),
    ({"sys_vendor": "Akamai Technologies"}, False),
    ({"product_name": "Linode"}, False),
    ({}, False),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (Akamai.why(context(target)) is not None) == found
    if not found:
        assert find_datasource(context(target), ["Akamai"]).tried == []  # no request, no wait


def test_dmi_flags_and_configuration(target):
    write_tree(target.top, {"sys/class/dmi/id/baseboard_serial": "als=0;v6=0;pmp=f2:3\n"})
    found = settings(context(target), {})
    assert found == {"allow_local_stage": False, "allow_init_stage": True, "allow_ipv4": True, "allow_ipv6": False}
    assert settings(context(target), {"allow_ipv6": True})["allow_ipv6"] is True


class _Patched:
    """CloudLab builds its NetLab itself: give it Akamai's IPv6 address too (restored on exit)."""

    def __enter__(self):
        self.saved = cloudlab.NetLab
        cloudlab.NetLab = lambda *a, **k: netlab.NetLab(*a, extra_addresses=(V6,), **k)

    def __exit__(self, *exc):
        cloudlab.NetLab = self.saved


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    with _Patched():
        lab = CloudLab(str(tmp_path_factory.mktemp("ak")), LINODE_ID, {"akamai": {"region": "us-iad"}},
                       USER_DATA, extra=["--address", "fd00:ec2::2/64"],
                       listen=["169.254.169.254:80", f"[{V6}]:80"])
    yield lab
    lab.close()


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "akamai" and v1["platform"] == "akamai"
        assert v1["instance_id"] == LINODE_ID and v1["local_hostname"] == "lab-vm"
        assert v1["region"] == "us-iad"
        assert v1["public_ssh_keys"] == [KEY]
        assert root.read("/etc/hostname").strip() == "lab-vm"
        assert KEY in root.read("/home/debian/.ssh/authorized_keys")
        assert root.read("/etc/from-akamai-user-data") == "seen"  # base64 on the wire
        assert data["ds"]["network"]["ipv4"]["private"] == [f"{cloud.lab.guest_ip}/24"]
    finally:
        root.close()


def test_ipv6_alone(cloud, tmp_path):
    write_tree(tmp_path, {"sys/class/dmi/id/sys_vendor": "Akamai\n"})
    out = find_in_guest(cloud.lab, str(tmp_path), ["Akamai"], cfg={"datasource": {"Akamai": {"allow_ipv4": False}}})
    assert out["ds"] is not None, out["errors"]
    assert out["address"] == f"http://[{V6}]" and out["ds"]["userdata_raw"] == USER_DATA
    assert out["ds"]["network_config"] is None  # no network config from Akamai: the fallback, as cloud-init 23.4


@pytest.mark.parametrize("facts,enabled", [({"sys_vendor": "Linode"}, True), ({"sys_vendor": "QEMU"}, False)])
def test_generators_enable_the_agent_on_akamai(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        assert ("Akamai (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)


TOKEN = {"status": 200, "body": "e80eb80986f17fcd3df8fcb6ea944774"}
INSTANCE = json.dumps({"id": 5, "label": "x", "region": "us-east"})


@pytest.mark.parametrize("script,expect", [
    ({"/v1/token": {"action": "silent"}}, None),
    ({"/v1/token": {"status": 403, "body": "metadata disabled"}}, "token was refused"),
    ({"/v1/token": TOKEN, "/v1/instance": {"action": "close"}}, "/v1/instance"),
    ({"/v1/token": TOKEN, "/v1/instance": {"body": "{\"id\": 5, tru"}}, "not JSON"),
    ({"/v1/token": TOKEN, "/v1/instance": {"body": "{}"}, "*": {"body": "{}"}}, "no id"),
    ({"/v1/token": TOKEN, "/v1/instance": {"body": INSTANCE}, "/v1/ssh-keys": {"body": "{}"},
      "/v1/network": {"body": "{}"}, "/v1/user-data": {"status": 401, "body": "bad token"}}, "401"),
], ids=["silent", "token-refused", "closed-mid-reply", "truncated-json", "no-id", "user-data-401"])
def test_hostile_services_fail_clearly_and_quickly(tmp_path, script, expect):
    facts = {"sys/class/dmi/id/sys_vendor": "Linode\n"}
    out, took = find_against_script(str(tmp_path), script, facts, ["Akamai"], QUICK)
    assert took < 20
    assert out["ds"] is None
    if expect is None:
        assert out["took"] < 6
    else:
        assert expect in " ".join(out["errors"]), out["errors"]
