"""The Scaleway datasource: detection (DMI, /var/run/scaleway, the kernel command line), a boot
against ``cloudseed serve``'s Scaleway emulation at 169.254.42.42 in a guest network namespace
(user-data only reaches a privileged source port there), and hostile services: a silent one,
a truncated or non-JSON document, user-data refused.
"""

from __future__ import annotations

import json
import os

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.scaleway import Scaleway, network_config, public_keys
from cloudseed.agent.state import Paths
from tests.agent.datasources import cloudlab, netlab
from tests.agent.datasources.cloudlab import KEY, OTHER_KEY, CloudLab, generators, provision
from tests.agent.datasources.netlab import NetLab, find_against_script, find_in_guest, write_tree

ADDRESS = "169.254.42.42"
USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-scaleway-user-data, content: seen}\n"
SERVER_ID = "5e7c1a7e-0000-4000-8000-00000000abcd"
DMI = {"sys_vendor": "Scaleway", "product_name": "SCW-DEV1-S"}
QUICK = {"datasource": {"Scaleway": {"max_wait": 1, "timeout": 1, "retries": 0}}}
PATIENT = {"datasource": {"Scaleway": {"max_wait": 20, "timeout": 10, "retries": 2}}}  # where the server answers


def context(target, cmdline: str = "") -> DatasourceContext:
    return DatasourceContext(root=target, cfg={}, cmdline=cmdline, paths=Paths(target), stage="network")


@pytest.mark.parametrize("files,cmdline,found", [
    ({"sys/class/dmi/id/sys_vendor": "Scaleway\n"}, "", True),
    ({"var/run/scaleway": ""}, "", True),
    ({}, "root=/dev/vda1 scaleway boot=local", True),
    ({"sys/class/dmi/id/sys_vendor": "Scaleway SAS\n"}, "", False),
    ({"sys/class/dmi/id/sys_vendor": "QEMU\n"}, "root=/dev/vda1", False),
    ({}, "", False),
])
def test_detection_from_local_facts_only(target, files, cmdline, found):
    write_tree(target.top, files)
    assert (Scaleway.why(context(target, cmdline)) is not None) == found
    if not found:
        assert find_datasource(context(target, cmdline), ["Scaleway"]).tried == []  # no request, no wait


def test_keys_from_the_document_and_tags():
    md = {"ssh_public_keys": [{"key": KEY, "fingerprint": "x"}, {"nokey": 1}, "junk"],
          "tags": ["web", "AUTHORIZED_KEY=" + OTHER_KEY.replace(" ", "_"), "AUTHORIZED_KEY=", 5]}
    # deliberate difference from 22.4: it appends the tag's prefix ("AUTHORIZED KEY=") instead of the key
    assert public_keys(md) == [KEY, OTHER_KEY]
    assert public_keys({}) == []


def test_network_config_as_cloud_init_builds_it():
    md = {"ipv6": {"address": "2001:bc8::5", "gateway": "2001:bc8::1", "netmask": "64"}}
    assert network_config(md, "ens2", None) == {"version": 1, "config": [{"type": "physical", "name": "ens2",
                                                                          "subnets": [
        {"type": "dhcp4"},
        {"type": "static", "address": "2001:bc8::5", "netmask": "64",
         "routes": [{"network": "::", "prefix": "0", "gateway": "2001:bc8::1"}]}]}]}
    plain = network_config({"ipv6": None}, "ens2", "de:00:00:00:00:01")
    nic = plain["config"][0]
    assert nic["subnets"] == [{"type": "dhcp4"}] and nic["mac_address"] == "de:00:00:00:00:01"


class _Patched:
    """CloudLab builds its NetLab itself: give it Scaleway's address too (restored on exit)."""

    def __enter__(self):
        self.saved = cloudlab.NetLab
        cloudlab.NetLab = lambda *a, **k: netlab.NetLab(*a, extra_addresses=(ADDRESS,), **k)

    def __exit__(self, *exc):
        cloudlab.NetLab = self.saved


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    with _Patched():
        lab = CloudLab(str(tmp_path_factory.mktemp("sw")), "sw-lab", {"scaleway": {
            "server_id": SERVER_ID, "server_tags": ["AUTHORIZED_KEY=" + OTHER_KEY.replace(" ", "_")]}},
            USER_DATA, listen=[f"{ADDRESS}:80"])
    yield lab
    lab.close()


def test_boot_provisions_a_root(cloud):
    root, data = provision(cloud, DMI)
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "scaleway" and v1["platform"] == "scaleway"
        assert v1["instance_id"] == SERVER_ID and v1["local_hostname"] == "lab-vm"
        assert v1["region"] == "zone-a" and v1["availability_zone"] == "zone-a-1"
        assert v1["public_ssh_keys"] == [KEY, OTHER_KEY]
        assert root.read("/etc/hostname").strip() == "lab-vm"
        keys = root.read("/home/debian/.ssh/authorized_keys")
        assert KEY in keys and OTHER_KEY in keys
        # user-data came from a privileged source port: the emulation refuses any other
        assert root.read("/etc/from-scaleway-user-data") == "seen"
        rendered = "".join(root.read(f"/etc/systemd/network/{f}")
                           for f in sorted(os.listdir(os.path.join(root.top, "etc/systemd/network"))))
        assert "DHCP=ipv4" in rendered
    finally:
        root.close()


def test_unprivileged_user_data_request_is_refused_by_the_emulation(cloud):
    probe = cloud.lab.guest_exec("curl", "-s", "-w", " %{http_code}", "-m", "5",
                                 f"http://{ADDRESS}/user_data/cloud-init", check=False)
    assert probe.stdout.endswith(" 403") and "privileged source port" in probe.stdout


@pytest.mark.parametrize("facts,enabled", [({"sys_vendor": "Scaleway"}, True), ({"sys_vendor": "QEMU"}, False)])
def test_generators_enable_the_agent_on_scaleway(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        assert ("Scaleway (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)


GOOD_CONF = json.dumps({"id": "srv-1", "hostname": "h", "ssh_public_keys": [], "tags": [], "ipv6": None})


@pytest.mark.parametrize("script,expect", [
    ({"/conf": {"action": "silent"}}, None),
    ({"/conf": {"action": "close"}}, None),
    ({"/conf": {"body": "{\"id\": \"x\", trunc"}}, "not JSON"),
    ({"/conf": {"body": "[1, 2]"}}, "not a Scaleway server document"),
    ({"/conf": {"body": GOOD_CONF}, "*": {"status": 403, "body": "port too high"}}, "only served to root"),
    ({"/conf": {"body": GOOD_CONF}, "/user_data/cloud-init": {"action": "silent"}}, "userdata from"),
], ids=["silent", "closed-mid-reply", "truncated-json", "not-an-object", "user-data-refused", "user-data-silent"])
def test_hostile_services_fail_clearly_and_quickly(tmp_path, script, expect):
    facts = {"sys/class/dmi/id/sys_vendor": "Scaleway\n"}
    out, took = find_against_script(str(tmp_path), script, facts, ["Scaleway"], QUICK, address=ADDRESS)
    assert took < 20
    assert out["ds"] is None
    if expect is None:
        assert out["took"] < 6
    else:
        assert expect in " ".join(out["errors"]), out["errors"]


def test_without_user_data_the_server_still_boots(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    lab = NetLab(extra_addresses=(ADDRESS,))
    try:
        script = json.dumps({"/conf": {"body": GOOD_CONF}})
        lab.start_in_cloud(netlab.PYTHON, netlab.SCRIPTED_SERVER, ADDRESS, "80", script,
                           ready="ready")
        write_tree(tmp_path, {"var/run/scaleway": ""})
        # the server answers here: a loaded CI machine may take more than QUICK's 1 s for it
        out = find_in_guest(lab, str(tmp_path), ["Scaleway"], cfg=PATIENT)
        assert out["ds"] is not None and out["ds"]["userdata_raw"] is None and out["ds"]["vendordata_raw"] is None
    finally:
        lab.close()


def test_a_privileged_port_in_use_is_skipped(cloud):
    """Port 1 (the first tried) is held by a listener in the guest: the request binds port 2."""
    out = cloud.lab.guest_python(f"""
import json, socket
from cloudseed.agent.datasources import scaleway
held = socket.socket()
held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
held.bind(("0.0.0.0", 1))
held.listen(1)
data = scaleway.privileged_get("http://{ADDRESS}/user_data/cloud-init", 5)
print(json.dumps({{"data": data.decode()}}))
""")
    assert out["data"] == USER_DATA
