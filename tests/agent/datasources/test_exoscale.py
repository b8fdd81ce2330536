"""The Exoscale datasource: detection from DMI, and a guest in a network namespace reading
``cloudseed serve``'s Exoscale emulation at 169.254.169.254 (``/1.0/``) and its password server
on port 8080; a password server closing mid-reply or never answering.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.exoscale import Exoscale
from cloudseed.agent.state import Paths
from cloudseed.provider.registry import open_registry
from tests.agent.datasources.cloudlab import KEY, PYTHON, CloudLab, generators, provision
from tests.agent.datasources.cloudstack_support import RawServer, matches
from tests.agent.datasources.netlab import find_in_guest, write_tree

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-exoscale-user-data, content: seen}\n"
IID = "1c8e5a2b-0000-4000-8000-0000000e0001"
DMI = {"sys_vendor": "Exoscale", "product_name": "Exoscale Compute Platform"}
PASSWORD = "Exo-Pa55word"


def context(target, cfg=None) -> DatasourceContext:
    return DatasourceContext(root=target, cfg=cfg or {}, cmdline="", paths=Paths(target), stage="network")


@pytest.mark.parametrize("facts,found", [
    ({"product_name": "Exoscale Compute Platform"}, True),
    ({"product_name": "Exoscale"}, True),
    ({"sys_vendor": "Exoscale", "product_name": "KVM"}, False),  # 22.4 reads the product name only
    ({"product_name": "CloudStack KVM Hypervisor"}, False),
    ({}, False),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (Exoscale.why(context(target)) is not None) == found
    if not found:
        assert find_datasource(context(target), ["Exoscale"]).tried == []


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    tmp = str(tmp_path_factory.mktemp("exo"))
    lab = CloudLab(tmp, IID, {"exoscale": {}}, USER_DATA,
                   serve_extra=["--password-server-listen", "169.254.169.254:8080"])
    lab.db = os.path.join(tmp, "server.db")
    yield lab
    lab.close()


def set_password(cloud, password: str | None) -> None:
    registry = open_registry(cloud.db)
    try:
        registry.clear_password(IID)
        if password:  # the operator's password (a guest-posted one is never served back)
            registry.update(IID, password=password)
    finally:
        registry.close()
    time.sleep(1.2)  # the server follows the registry's change log (within a second)


def password_set(cloud) -> bool:
    registry = open_registry(cloud.db)
    try:
        return registry.get(IID).password is not None
    finally:
        registry.close()


def dmi_root(tmp_path) -> str:
    write_tree(tmp_path, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI.items()})
    return str(tmp_path)


def test_reads_metadata_and_the_password_once(cloud, tmp_path):
    set_password(cloud, PASSWORD)
    out = find_in_guest(cloud.lab, dmi_root(tmp_path), ["Exoscale"])
    ds = out["ds"]
    assert ds is not None, out
    assert out["address"] == "http://169.254.169.254"
    assert ds["metadata"]["instance-id"] == IID and ds["metadata"]["local-hostname"] == "lab-vm"
    assert ds["raw"]["_metadata_api_version"] == "1.0"
    assert ds["public_keys"] == [KEY] and ds["userdata_raw"] == USER_DATA
    assert ds["extra"]["cloud_config"] == {"ssh_pwauth": True, "password": PASSWORD, "chpasswd": {"expire": False}}
    assert not password_set(cloud)
    again = find_in_guest(cloud.lab, dmi_root(tmp_path), ["Exoscale"])
    assert again["ds"] is not None and again["ds"]["extra"] == {}


def test_boot_sets_the_password_and_keeps_it_out_of_instance_data(cloud):
    set_password(cloud, PASSWORD)
    root, data = provision(cloud, DMI, cfg="cloud_config_modules: [set_passwords]\n")
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "exoscale" and v1["platform"] == "exoscale"
        assert v1["instance_id"] == IID and v1["availability_zone"] == "zone-a-1"
        assert v1["public_ssh_keys"] == [KEY]
        with open(os.path.join(root.top, "run/cloudseed/instance-data.json")) as f:
            assert PASSWORD not in f.read()
        assert root.read("/etc/from-exoscale-user-data") == "seen"
        proc = cloud.lab.guest_exec(PYTHON, "-m", "cloudseed", "--root", root.top, "modules", "--mode", "config",
                                    check=False, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        shadow = {line.split(":")[0]: line.split(":")[1] for line in root.read("/etc/shadow").splitlines()}
        assert matches(PASSWORD, shadow["debian"])
        # a reboot after a password reset from the console: the new one is set on that boot
        set_password(cloud, "Reset-Pa55word")
        shutil.rmtree(os.path.join(root.top, "run"))
        for stage in (["init", "--local"], ["init"], ["modules", "--mode", "config"]):
            proc = cloud.lab.guest_exec(PYTHON, "-m", "cloudseed", "--root", root.top, *stage, check=False,
                                        timeout=120)
            assert proc.returncode == 0, proc.stderr[-3000:]
        shadow = {line.split(":")[0]: line.split(":")[1] for line in root.read("/etc/shadow").splitlines()}
        assert matches("Reset-Pa55word", shadow["debian"])
        assert not password_set(cloud)
        # and a reboot without a reset changes nothing
        shutil.rmtree(os.path.join(root.top, "run"))
        for stage in (["init", "--local"], ["init"], ["modules", "--mode", "config"]):
            cloud.lab.guest_exec(PYTHON, "-m", "cloudseed", "--root", root.top, *stage, timeout=120)
        assert root.read("/etc/shadow").count(shadow["debian"]) == 1
    finally:
        root.close()


@pytest.mark.parametrize("reply", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\nExo-Pa",  # the connection closes mid-reply
    None,  # accepts and never answers
])
def test_hostile_password_server(cloud, tmp_path, reply):
    server = RawServer(cloud, 8085, reply, host="169.254.169.254")
    try:
        started = time.monotonic()
        out = find_in_guest(cloud.lab, dmi_root(tmp_path), ["Exoscale"],
                            cfg={"datasource": {"Exoscale": {"password_server_port": 8085, "timeout": 2,
                                                             "retries": 0}}})
        took = time.monotonic() - started
    finally:
        server.close()
    assert out["ds"] is not None and out["ds"]["extra"] == {}, out
    assert any("password server:" in w and "169.254.169.254:8085" in w for w in out["warnings"]), out["warnings"]
    assert took < 15


def test_silent_metadata_service_is_a_bounded_wait(cloud, tmp_path):
    server = RawServer(cloud, 8086, None, host="169.254.169.254")
    try:
        out = find_in_guest(cloud.lab, dmi_root(tmp_path), ["Exoscale"],
                            cfg={"datasource": {"Exoscale": {"metadata_url": "http://169.254.169.254:8086",
                                                             "max_wait": 2}}})
    finally:
        server.close()
    assert out["ds"] is None and out["took"] < 8, out


@pytest.mark.parametrize("facts,enabled", [({"product_name": "Exoscale Compute Platform"}, True),
                                           ({"sys_vendor": "Exoscale"}, False)])
def test_generators_enable_the_agent_on_exoscale(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        assert ("Exoscale (DMI" in verdict) == enabled, (kind, verdict)
