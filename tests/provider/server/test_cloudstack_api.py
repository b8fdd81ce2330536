"""CloudStack's metadata API and password server from ``cloudseed serve`` (SQLite and PostgreSQL),
and Debian's cloud-init 22.4 DataSourceCloudStack - its lease-file search, its EC2 crawl and its
wget password client - reading them from the guest's DHCP server address in namespaces.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.provider.server.cloud_reference import COMMON, CloudNamespaces
from tests.provider.server.server_support import ServerProcess, http, new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
KEY2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAHSFCj bob@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
PASSWORD = "Pa55-w0rd:with spaces"


@pytest.fixture(scope="module")
def cs(db_url, tmp_path_factory):
    """A server with a password-server listener on loopback (its port read from the start line)."""
    proc = ServerProcess(db_url, str(tmp_path_factory.mktemp("cs-server")), ["127.0.0.1:0"],
                         config={"rate_limit": 0, "password_server_listen": ["127.0.0.1:0"]})
    proc.password_port = int(re.search(r"password 127\.0\.0\.1:(\d+)", proc.log()).group(1))
    yield proc
    proc.stop()


def register(server, clouds=None, **extra):
    address = new_address()
    instance_id = f"cs-{address.replace('.', '-')}"
    fields = {"instance_id": instance_id, "hostname": "cs-vm", "availability_zone": "zone-1",
              "addresses": [{"address": address, "network": "default"}], "instance_type": "Small Instance",
              "ssh_keys": [{"name": "alice", "data": KEY}, {"name": "bob", "data": KEY2}], "user_data": USER_DATA,
              "clouds": {"cloudstack": {}} if clouds is None else clouds}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address


def ask(server, address: str, request: str | None, method: str = "GET"):
    return http(server.password_port, "/", method=method, source=address,
                headers={"DomU_Request": request} if request else {})


def test_metadata_tree(cs):
    instance_id, address = register(cs, clouds={"cloudstack": {"service_offering": "Medium"}})
    assert cs.get("/", address).text.split() == ["1.0", "latest"]
    assert cs.get("/latest/", address).text.split() == ["meta-data", "user-data"]
    listing = cs.get("/latest/meta-data/", address).text.split("\n")
    assert listing == ["availability-zone", "cloud-identifier", "instance-id", "local-hostname", "local-ipv4",
                       "public-hostname", "public-ipv4", "public-keys", "service-offering", "vm-id"]
    assert cs.get("/latest/meta-data/instance-id", address).text == instance_id
    assert cs.get("/latest/meta-data/vm-id", address).text == instance_id
    assert cs.get("/latest/meta-data/local-hostname", address).text == "cs-vm"
    assert cs.get("/latest/meta-data/local-ipv4", address).text == address
    assert cs.get("/latest/meta-data/availability-zone", address).text == "zone-1"
    assert cs.get("/latest/meta-data/service-offering", address).text == "Medium"
    assert cs.get("/latest/meta-data/public-keys", address).text == f"{KEY}\n{KEY2}"
    assert cs.get("/latest/meta-data/cloud-identifier", address).text.startswith("CloudStack-{")
    assert cs.get("/latest/user-data", address).text == USER_DATA
    assert cs.get("/1.0/meta-data/instance-id", address).text == instance_id
    assert cs.get("/latest/meta-data/nothing", address).status == 404
    assert cs.get("/latest/meta-data/instance-id/deeper", address).status == 404
    assert cs.get("/2009-04-04/meta-data/instance-id", address).status == 404  # not a CloudStack version
    assert cs.get("/latest/user-data", address, method="POST").status == 405


def test_no_user_data_is_404_and_ec2_records_keep_ec2(cs):
    _, address = register(cs, user_data=None)
    assert cs.get("/latest/user-data", address).status == 404
    assert cs.get("/latest/", address).text.split() == ["meta-data"]
    _, ec2 = register(cs, clouds={})
    assert "ami-id" in cs.get("/latest/meta-data/", ec2).text.split()  # the EC2 tree, not CloudStack's


def test_password_served_until_acknowledged(cs):
    instance_id, address = register(cs, password=PASSWORD)
    assert cs.admin("GET", f"/v1/instances/{instance_id}").json()["password_set"] is True
    first = ask(cs, address, "send_my_password")
    assert first.status == 200 and first.text == PASSWORD
    assert ask(cs, address, "send_my_password").text == PASSWORD  # not acknowledged yet: again
    saved = ask(cs, address, "saved_password")
    assert saved.status == 200 and saved.text == "saved_password"
    assert ask(cs, address, "send_my_password").text == "saved_password"
    assert cs.admin("GET", f"/v1/instances/{instance_id}").json()["password_set"] is False
    assert ask(cs, address, "saved_password").text == "saved_password"  # acknowledging twice is harmless
    # never in the log or the access log
    time.sleep(0.6)  # the access log is flushed twice a second
    with open(cs.access_log) as f:
        assert PASSWORD not in f.read()
    assert PASSWORD not in cs.log()


def test_password_server_refusals(cs):
    _, address = register(cs, password=PASSWORD)
    bad = ask(cs, address, "give_me_everything")
    assert bad.status == 400 and bad.text == "bad_request"
    assert ask(cs, address, None).status == 400
    assert ask(cs, address, "send_my_password", method="POST").status == 405
    _, none = register(cs)
    assert ask(cs, none, "send_my_password").text == "saved_password"  # no password set
    # another cloud's instance (an OpenStack password is the guest's own, never served here)
    _, openstack = register(cs, clouds={}, password="encrypted-by-the-guest")
    refused = ask(cs, openstack, "send_my_password")
    assert refused.status == 404 and "encrypted" not in refused.text
    assert ask(cs, new_address(), "send_my_password").status == 404  # nobody's address


def test_password_isolation_by_source_address(cs):
    _, one = register(cs, password="first-password")
    _, two = register(cs, password="second-password")
    assert ask(cs, one, "send_my_password").text == "first-password"
    assert ask(cs, two, "send_my_password").text == "second-password"
    ask(cs, one, "saved_password")
    assert ask(cs, two, "send_my_password").text == "second-password"  # one's ack does not touch two


def test_password_server_is_off_by_default(server):
    _, address = register(server, password=PASSWORD)
    assert "password" not in server.log().split("serving on", 1)[1].split("\n", 1)[0]
    # the metadata listener does not speak it: the header changes nothing there
    reply = server.get("/latest/meta-data/", address, headers={"DomU_Request": "send_my_password"})
    assert reply.status == 200 and PASSWORD not in reply.text


# ---------------------------------------------------------------- cloud-init 22.4 as the client

@pytest.fixture(scope="module")
def cs_cloud(tmp_path_factory):
    cloud = CloudNamespaces(str(tmp_path_factory.mktemp("cs-ref") / "server.db"),
                            str(tmp_path_factory.mktemp("cs-ref-server")),
                            serve_extra=("--listen", "ROUTER:80", "--password-server-listen", "ROUTER:8080"))
    yield cloud
    cloud.close()


REFERENCE = COMMON + """
import os
from cloudinit.net import dhcp
from cloudinit.sources import DataSourceCloudStack as ds
leases = tmp + "/dhclient"
os.makedirs(leases, exist_ok=True)
with open(leases + "/dhclient.eth0.leases", "w") as f:
    f.write("lease {\\n  interface \\"eth0\\";\\n  fixed-address GUEST;\\n"
            "  option dhcp-server-identifier ROUTER;\\n  option routers ROUTER;\\n}\\n")
ds.get_dhclient_d = lambda: leases  # this namespace's lease directory (the host's /var/lib is not it)
dhcp.networkd_get_option_from_leases = lambda *a, **k: None  # nor is the host's /run
src = ds.DataSourceCloudStack({"datasource": {"CloudStack": {"max_wait": 10, "timeout": 5}}}, distro, paths)
ok = src.get_data()
report(src, ok, vr=src.vr_addr, config=src.get_config_obj())
"""


@pytest.mark.root
@pytest.mark.reference
def test_reference_cloudstack_reads_metadata_and_password(cs_cloud, tmp_path):
    cs_cloud.server.admin("DELETE", "/v1/instances/cs-ref-1")
    cs_cloud.server.add(instance_id="cs-ref-1", hostname="ref-cs", availability_zone="zone-ref",
                        addresses=[{"address": cs_cloud.guest_ip, "network": "default"}], macs=[cs_cloud.mac],
                        user_data=USER_DATA, ssh_keys=[{"name": "k", "data": KEY}, {"name": "k2", "data": KEY2}],
                        clouds={"cloudstack": {}}, password=PASSWORD)
    code = REFERENCE.replace("GUEST", cs_cloud.guest_ip).replace("ROUTER", cs_cloud.router_ip)
    result = cs_cloud.reference_in(code, str(tmp_path))
    assert result["ok"] is True and result["vr"] == cs_cloud.router_ip
    assert result["instance_id"] == "cs-ref-1" and result["hostname"] == "ref-cs"
    assert result["availability_zone"] == "zone-ref"
    assert result["keys"] == [KEY, KEY2] and result["userdata"] == USER_DATA
    assert result["metadata"]["local-ipv4"] == cs_cloud.guest_ip
    assert result["config"] == {"ssh_pwauth": True, "password": PASSWORD, "chpasswd": {"expire": False}}
    # wget acknowledged it: served once
    assert cs_cloud.server.admin("GET", "/v1/instances/cs-ref-1").json()["password_set"] is False
    again = cs_cloud.reference_in(code, str(tmp_path / "again"))
    assert again["ok"] is True and again["config"] == {}


def test_password_server_listen_setting():
    from cloudseed.provider.server.config import ConfigError, load_config

    config = load_config(None, {"password_server_listen": ["10.0.0.1:8080=net-a", "[fd00::1]:8080"]})
    assert [(s.host, s.port, s.network) for s in config.password_server_listen] == [
        ("10.0.0.1", 8080, "net-a"), ("fd00::1", 8080, None)]
    assert load_config(None, {}).password_server_listen == []  # off by default
    for bad in (["data-server:8080"], ["10.0.0.1"], {"a": 1}):
        with pytest.raises(ConfigError, match="password_server_listen"):
            load_config(None, {"password_server_listen": bad})


def test_password_server_with_worker_processes(tmp_path):
    """Workers share the metadata ports; the password server is the first process's alone."""
    proc = ServerProcess(str(tmp_path / "server.db"), str(tmp_path / "srv"), ["127.0.0.1:0"],
                         config={"rate_limit": 0, "processes": 2, "password_server_listen": ["127.0.0.1:0"]})
    try:
        proc.password_port = int(re.search(r"password 127\.0\.0\.1:(\d+)", proc.log()).group(1))
        _, address = register(proc, password=PASSWORD)
        assert ask(proc, address, "send_my_password").text == PASSWORD
        assert ask(proc, address, "saved_password").text == "saved_password"
        for _ in range(4):  # whichever process answers the metadata, none serves the password again
            assert ask(proc, address, "send_my_password").text == "saved_password"
        assert "cannot listen" not in proc.log()
    finally:
        proc.stop()
