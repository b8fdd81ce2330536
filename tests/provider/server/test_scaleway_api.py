"""Scaleway's metadata API (``/conf``, ``/user_data/cloud-init``, ``/vendor_data/cloud-init``) from
``cloudseed serve``, on SQLite and PostgreSQL, and Debian's cloud-init 22.4 DataSourceScaleway
reading it at 169.254.42.42 in namespaces, its user-data request from a privileged source port.
"""

from __future__ import annotations

import http.client
import json
import socket

import pytest

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces
from tests.provider.server.server_support import Reply, new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
TAG_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFromTag bob@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
VENDOR = "#cloud-config\npackages: [htop]\n"


def register(server, **extra):
    address = new_address()
    v6 = f"2001:bc8:{address.split('.')[2]}:{address.split('.')[3]}::1"
    fields = {"instance_id": f"sw-{address}", "hostname": "sw-1", "availability_zone": "fr-par-1",
              "addresses": [{"address": address, "network": "default", "mac": "de:00:00:00:00:01"},
                            {"address": v6, "network": "default", "mac": "de:00:00:00:00:01", "prefix": 64}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA, "vendor_data": VENDOR,
              "clouds": {"scaleway": {"commercial_type": "DEV1-S",
                                      "server_tags": ["web", "AUTHORIZED_KEY=" + TAG_KEY.replace(" ", "_")]}}}
    fields.update(extra)
    server.add(**fields)
    return fields["instance_id"], address, v6


def from_port(server, path: str, source: str, port: int) -> Reply:
    """GET ``path`` from ``source``:``port`` (a privileged port when < 1024: root only)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.settimeout(10)
    sock.bind((source, port))
    sock.connect(("127.0.0.1", server.port))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.sock = sock
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        conn.close()


def test_conf_json_and_shell(server):
    instance_id, address, v6 = register(server)
    doc = server.get("/conf?format=json", address).json()
    assert doc["hostname"] == "sw-1" and doc["commercial_type"] == "DEV1-S"
    key = doc["ssh_public_keys"][0]
    assert key["key"] == KEY and key["fingerprint"].startswith("256 SHA256:")
    assert doc["tags"][1].startswith("AUTHORIZED_KEY=ssh-ed25519_")
    assert doc["ipv6"] == {"address": v6, "gateway": v6.rsplit("::", 1)[0] + "::1", "netmask": "64"}
    assert doc["zone"] == "fr-par-1" and doc["location"]["zone_id"] == "fr-par-1"
    assert len(doc["id"]) == 36 and doc["id"] == server.get("/conf?format=json", address).json()["id"]
    shell = server.get("/conf", address).text  # the same path, the other form: never mixed up by a cache
    assert "HOSTNAME=sw-1\n" in shell and "COMMERCIAL_TYPE=DEV1-S\n" in shell and "TAGS=2\n" in shell
    assert f"SSH_PUBLIC_KEYS_0_KEY='{KEY}'\n" in shell and "ZONE=fr-par-1\n" in shell
    assert server.get("/conf?format=json", address).json() == doc


def test_user_data_only_from_a_privileged_port(server):
    _, address, _ = register(server)
    refused = server.get("/user_data/cloud-init", address)
    assert refused.status == 403 and "privileged source port" in refused.text
    assert server.get("/vendor_data/cloud-init", address).status == 403
    assert from_port(server, "/user_data/cloud-init", address, 1023).text == USER_DATA
    assert from_port(server, "/vendor_data/cloud-init", address, 1022).text == VENDOR
    assert from_port(server, "/user_data", address, 1021).text == "cloud-init\n"
    assert from_port(server, "/user_data?format=json", address, 1020).json() == {"user_data": ["cloud-init"]}
    # after privileged answers, an unprivileged request is still refused (no per-path cache)
    assert server.get("/user_data/cloud-init", address).status == 403
    assert server.get("/user_data/cloud-init", address, method="POST").status == 405


def test_no_user_data_is_404(server):
    _, address, _ = register(server, user_data=None, vendor_data=None)
    assert from_port(server, "/user_data/cloud-init", address, 1019).status == 404
    assert from_port(server, "/vendor_data/cloud-init", address, 1018).status == 404
    assert from_port(server, "/user_data", address, 1017).text == ""


def test_isolation_by_source_address(server):
    one_id, one, _ = register(server)
    _, two, _ = register(server, hostname="sw-2", user_data="#cloud-config\n{}\n")
    assert server.get("/conf?format=json", one).json()["hostname"] == "sw-1"
    assert server.get("/conf?format=json", two).json()["hostname"] == "sw-2"
    assert from_port(server, "/user_data/cloud-init", two, 1016).text == "#cloud-config\n{}\n"
    assert server.get("/conf?format=json", new_address()).status == 404


def test_record_settings_are_validated(server):
    reply = server.admin("POST", "/v1/instances", {"instance_id": "sw-bad", "clouds": {"scaleway": {
        "server_tags": ["ok", "bad\nline"]}}})
    assert reply.status == 400 and "clouds.scaleway.server_tags" in reply.text


@pytest.fixture(scope="module")
def sw_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("sw-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("sw-ref-server")), metadata_ip="169.254.42.42")
    yield cloud
    cloud.close()


REFERENCE = COMMON + """
from cloudinit.sources import DataSourceScaleway as ds
import contextlib
ds.on_scaleway = lambda: True  # the DMI/cmdline check: this namespace is no Scaleway server
ds.EphemeralDHCPv4 = lambda *a, **k: contextlib.nullcontext()  # the namespace is configured already
ds.time.sleep = lambda s: None
ds.net.find_fallback_nic = lambda *a, **k: "eth0"
src = ds.DataSourceScaleway({"datasource": {"Scaleway": {"retries": 3, "timeout": 5}}}, distro, paths)
ok = src.get_data()
report(src, ok)
"""


@pytest.mark.root
@pytest.mark.reference
def test_reference_scaleway_datasource_reads_the_emulation(sw_cloud, tmp_path):
    sw_cloud.server.admin("DELETE", "/v1/instances/sw-ref")
    v6 = "2001:bc8:1::5"
    sw_cloud.server.add(instance_id="sw-ref", hostname="ref-sw", availability_zone="nl-ams-1",
                        addresses=[{"address": sw_cloud.guest_ip, "network": "default"},
                                   {"address": v6, "network": "default", "prefix": 64}], macs=[sw_cloud.mac],
                        user_data=USER_DATA, vendor_data=VENDOR, ssh_keys=[{"name": "k", "data": KEY}],
                        clouds={"scaleway": {"server_id": "ref-uuid-1", "server_tags": ["web"]}})
    result = sw_cloud.reference_in(REFERENCE, str(tmp_path))
    assert result["ok"] is True
    assert result["instance_id"] == "ref-uuid-1" and result["hostname"] == "ref-sw"
    assert result["keys"] == [KEY]
    # the user-data and vendor-data came through the reference's privileged-port request
    assert result["userdata"] == USER_DATA and result["vendordata"] == VENDOR
    assert result["network_config"] == {"version": 1, "config": [{"type": "physical", "name": "eth0", "subnets": [
        {"type": "dhcp4"},
        {"type": "static", "address": v6, "netmask": "64",
         "routes": [{"network": "::", "prefix": "0", "gateway": "2001:bc8:1::1"}]}]}]}
    # 22.4 reports neither region nor zone (a deliberate difference: the agent reads "zone")
    assert result["region"] is None and result["availability_zone"] is None
    assert json.loads(json.dumps(result["metadata"]))["zone"] == "nl-ams-1"


@pytest.mark.root
@pytest.mark.reference
def test_reference_scaleway_without_user_data(sw_cloud, tmp_path):
    sw_cloud.server.admin("DELETE", "/v1/instances/sw-ref")
    sw_cloud.server.add(instance_id="sw-ref", hostname="ref-sw2", addresses=[
        {"address": sw_cloud.guest_ip, "network": "default"}], macs=[sw_cloud.mac])
    result = sw_cloud.reference_in(REFERENCE, str(tmp_path))
    assert result["ok"] is True and result["userdata"] is None and result["vendordata"] is None
    assert result["network_config"]["config"][0]["subnets"] == [{"type": "dhcp4"}]
