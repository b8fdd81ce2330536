"""Exoscale's metadata API (``/1.0/...``) and password server (port 8080 of 169.254.169.254) from
``cloudseed serve``, on SQLite and PostgreSQL, and Debian's cloud-init 22.4 DataSourceExoscale
(its EC2 crawl and its password client) reading them in namespaces.
"""

from __future__ import annotations

import pytest

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces
from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
PASSWORD = "exo-Pa55word"


def register(server, **extra):
    address = new_address()
    instance_id = f"exo-{address.replace('.', '-')}"
    fields = {"instance_id": instance_id, "hostname": "exo-vm", "availability_zone": "ch-gva-2",
              "addresses": [{"address": address, "network": "default"}], "instance_type": "standard.small",
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA,
              "clouds": {"exoscale": {"vm_id": "9d7f1e2a-0000-4000-8000-000000000001"}}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address


def test_metadata_tree_at_version_1_0(server):
    instance_id, address = register(server)
    assert server.get("/1.0/", address).text.split() == ["meta-data", "user-data"]
    assert "service-offering" in server.get("/1.0/meta-data/", address).text.split()
    assert server.get("/1.0/meta-data/instance-id", address).text == instance_id
    assert server.get("/1.0/meta-data/vm-id", address).text == "9d7f1e2a-0000-4000-8000-000000000001"
    assert server.get("/1.0/meta-data/service-offering", address).text == "standard.small"
    assert server.get("/1.0/meta-data/availability-zone", address).text == "ch-gva-2"
    assert server.get("/1.0/meta-data/public-keys", address).text == KEY
    assert server.get("/1.0/user-data", address).text == USER_DATA
    assert server.get("/latest/meta-data/local-hostname", address).text == "exo-vm"
    assert server.get("/1.0/meta-data/ami-id", address).status == 404  # not the EC2 tree


def test_ec2_record_at_1_0_is_ec2s(server):
    _, address = register(server, clouds={})
    assert "ami-id" in server.get("/1.0/meta-data/", address).text.split()  # default routing: EC2's 1.0


@pytest.fixture(scope="module")
def exo_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("exo-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("exo-ref-server")),
                            serve_extra=("--password-server-listen", "169.254.169.254:8080"))
    yield cloud
    cloud.close()


REFERENCE = COMMON + """
from cloudinit.sources import DataSourceExoscale as ds
ds.DataSourceExoscale._is_platform_viable = lambda self: True  # the DMI check: this namespace is no Exoscale VM
src = ds.DataSourceExoscale({"datasource": {"Exoscale": {"retries": 1, "timeout": 5}}}, distro, paths)
src.url_max_wait = 10
ok = src.get_data()
report(src, ok, config=src.get_config_obj())
"""


@pytest.mark.root
@pytest.mark.reference
def test_reference_exoscale_reads_metadata_and_password(exo_cloud, tmp_path):
    exo_cloud.server.admin("DELETE", "/v1/instances/exo-ref-1")
    exo_cloud.server.add(instance_id="exo-ref-1", hostname="ref-exo", availability_zone="de-fra-1",
                         addresses=[{"address": exo_cloud.guest_ip, "network": "default"}], macs=[exo_cloud.mac],
                         user_data=USER_DATA, ssh_keys=[{"name": "k", "data": KEY}],
                         clouds={"exoscale": {}}, password=PASSWORD)
    result = exo_cloud.reference_in(REFERENCE, str(tmp_path))
    assert result["ok"] is True
    assert result["instance_id"] == "exo-ref-1" and result["hostname"] == "ref-exo"
    assert result["keys"] == [KEY] and result["userdata"] == USER_DATA
    assert result["config"] == {"ssh_pwauth": True, "password": PASSWORD, "chpasswd": {"expire": False}}
    assert exo_cloud.server.admin("GET", "/v1/instances/exo-ref-1").json()["password_set"] is False
    again = exo_cloud.reference_in(REFERENCE, str(tmp_path / "again"))
    assert again["ok"] is True and again["config"] == {}  # acknowledged: not served again
