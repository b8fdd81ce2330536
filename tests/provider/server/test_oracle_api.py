"""Oracle Cloud's IMDS (``/opc/v2/``, ``/opc/v1/``) from ``cloudseed serve``, on SQLite and PostgreSQL,
and Debian's cloud-init 22.4 DataSourceOracle reading it in namespaces.
"""

from __future__ import annotations

import base64

import pytest

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces
from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
KEY2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx4 bob@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
BEARER = {"Authorization": "Bearer Oracle"}


def register(server, **extra):
    address = new_address()
    instance_id = f"ocid1.instance.oc1.phx.{address.replace('.', '')}"
    second = "10.1." + address.split(".", 2)[2]
    fields = {"instance_id": instance_id, "hostname": "oci-1", "name": "OCI One", "availability_zone": "phx-ad-1",
              "addresses": [{"address": address, "network": "default", "mac": "02:00:17:00:00:01", "prefix": 24},
                            {"address": second, "network": "second", "mac": "02:00:17:00:00:02", "prefix": 26}],
              "ssh_keys": [{"name": "a", "data": KEY}, {"name": "b", "data": KEY2}], "user_data": USER_DATA,
              "clouds": {"oracle": {"canonical_region": "us-phoenix-1", "shape": "VM.Standard.E4.Flex"}}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address, second


def test_v2_requires_the_bearer(server):
    _, address, _ = register(server)
    assert server.get("/opc/v2/instance/", address).status == 401
    assert server.get("/opc/v2/instance/", address, headers={"Authorization": "Bearer Other"}).status == 401
    assert server.get("/opc/v2/instance/", address, headers=BEARER).status == 200
    assert server.get("/opc/v2/vnics/", address).status == 401  # also once the answer is cached
    assert server.get("/opc/v1/instance/", address).status == 200  # v1: no header
    assert server.get("/opc/v3/instance/", address, headers=BEARER).status == 404


def test_instance_document(server):
    instance_id, address, _ = register(server)
    for version, headers in (("v2", BEARER), ("v1", {})):
        doc = server.get(f"/opc/{version}/instance/", address, headers=headers).json()
        assert doc["id"] == instance_id and doc["hostname"] == "oci-1" and doc["displayName"] == "OCI One"
        assert doc["ociAdName"] == "phx-ad-1" and doc["availabilityDomain"] == "EMIr:PHX-AD-1"
        assert doc["region"] == "phx" and doc["canonicalRegionName"] == "us-phoenix-1"
        assert doc["shape"] == "VM.Standard.E4.Flex"
        assert doc["metadata"]["ssh_authorized_keys"] == f"{KEY}\n{KEY2}"
        assert base64.b64decode(doc["metadata"]["user_data"]).decode() == USER_DATA
    assert server.get("/opc/v2/instance/hostname", address, headers=BEARER).text == "oci-1"
    assert server.get("/opc/v2/instance/metadata/ssh_authorized_keys", address,
                      headers=BEARER).text == f"{KEY}\n{KEY2}"
    assert server.get("/opc/v2/instance/nothing", address, headers=BEARER).status == 404


def test_vnics(server):
    _, address, second = register(server)
    vnics = server.get("/opc/v2/vnics/", address, headers=BEARER).json()
    assert [v["macAddr"] for v in vnics] == ["02:00:17:00:00:01", "02:00:17:00:00:02"]
    first = address.rsplit(".", 1)[0]
    assert vnics[0]["privateIp"] == address and vnics[0]["subnetCidrBlock"] == f"{first}.0/24"
    assert vnics[0]["virtualRouterIp"] == f"{first}.1" and vnics[0]["vnicId"].startswith("ocid1.vnic.")
    assert vnics[1]["privateIp"] == second and vnics[1]["subnetCidrBlock"].endswith("/26")
    assert "nicIndex" not in vnics[0]
    assert server.get("/opc/v2/vnics/1/privateIp", address, headers=BEARER).text == second
    _, other, _ = register(server, clouds={"oracle": {"bare_metal": True}})
    assert [v["nicIndex"] for v in server.get("/opc/v1/vnics/", other).json()] == [0, 1]


def test_isolation_by_source_address(server):
    one_id, one, _ = register(server)
    two_id, two, _ = register(server)
    assert server.get("/opc/v2/instance/id", one, headers=BEARER).text == one_id
    assert server.get("/opc/v2/instance/id", two, headers=BEARER).text == two_id
    assert server.get("/opc/v2/instance/", new_address(), headers=BEARER).status == 404


@pytest.fixture(scope="module")
def oci_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("oci-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("oci-ref-server")))
    yield cloud
    cloud.close()


REFERENCE = COMMON + """
from cloudinit.sources import DataSourceOracle as ds
import contextlib
ds._is_platform_viable = lambda: True  # the DMI check: this namespace is no OCI instance
ds._read_system_uuid = lambda: "uuid"
ds.ephemeral.EphemeralDHCPv4 = lambda *a, **k: contextlib.nullcontext()  # configured already
src = ds.DataSourceOracle({}, distro, paths)
src._is_iscsi_root = lambda: False
ok = src.get_data()
report(src, ok, version=src.metadata_address)
"""


@pytest.mark.root
@pytest.mark.reference
@pytest.mark.parametrize("v2", [True, False])
def test_reference_oracle_datasource_reads_the_emulation(oci_cloud, tmp_path, v2):
    iid = "ocid1.instance.oc1.phx.ref2" if v2 else "ocid1.instance.oc1.phx.ref1"
    for old in ("ocid1.instance.oc1.phx.ref2", "ocid1.instance.oc1.phx.ref1"):
        oci_cloud.server.admin("DELETE", f"/v1/instances/{old}")
    oci_cloud.server.add(instance_id=iid, hostname="ref-oci", name="Ref OCI", availability_zone="phx-ad-2",
                         addresses=[{"address": oci_cloud.guest_ip, "network": "default", "prefix": 24}],
                         macs=[oci_cloud.mac], user_data=USER_DATA, ssh_keys=[{"name": "k", "data": KEY}])
    code = REFERENCE
    if not v2:  # a wrong bearer: v2 answers 401 and the reference falls back to v1
        code = code.replace("ok = src.get_data()", "ds.V2_HEADERS = {'Authorization': 'Bearer Wrong'}\n"
                            "ok = src.get_data()")
    result = oci_cloud.reference_in(code, str(tmp_path))
    assert result["ok"] is True
    assert result["version"] == ("http://169.254.169.254/opc/v2/" if v2 else "http://169.254.169.254/opc/v1/")
    assert result["instance_id"] == iid and result["hostname"] == "ref-oci"
    assert result["metadata"]["availability-zone"] == "phx-ad-2" and result["metadata"]["name"] == "Ref OCI"
    assert result["keys"] == [KEY] and result["userdata"] == USER_DATA
    assert result["network_config"] == {"version": 1, "config": [
        {"name": "eth0", "type": "physical", "mac_address": oci_cloud.mac, "mtu": 9000, "subnets": [{"type": "dhcp"}]}]}
