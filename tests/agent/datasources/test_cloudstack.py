"""The CloudStack datasource: detection from DMI, the virtual router from lease files, and a guest
in a network namespace reading ``cloudseed serve``'s CloudStack emulation at its DHCP server's
address (found through a real dhclient lease file), with the password server on port 8080.
Hostile servers: a silent one, a password server closing mid-reply, junk answers.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from cloudseed.agent.datasources import DatasourceContext, find_datasource
from cloudseed.agent.datasources.cloudstack import CloudStack, latest_lease, lease_server, router_address
from cloudseed.agent.state import Paths
from cloudseed.provider.registry import open_registry
from tests.agent.datasources.cloudlab import KEY, PYTHON, CloudLab, generators, provision
from tests.agent.datasources.cloudstack_support import RawServer, matches
from tests.agent.datasources.netlab import find_in_guest, write_tree

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-cloudstack-user-data, content: seen}\n"
IID = "9c5c3f6e-0000-4000-8000-00000000cs01"
DMI = {"sys_vendor": "Apache Software Foundation", "product_name": "CloudStack KVM Hypervisor"}
PASSWORD = "Cl0udStack-pw"


def context(target, cfg=None) -> DatasourceContext:
    return DatasourceContext(root=target, cfg=cfg or {}, cmdline="", paths=Paths(target), stage="network")


def dhclient_lease(server: str) -> str:
    return ("lease {\n  interface \"eth0\";\n  fixed-address 10.1.1.5;\n"
            f"  option dhcp-server-identifier {server};\n  option routers 10.1.1.254;\n}}\n")


@pytest.mark.parametrize("facts,found", [
    ({"product_name": "CloudStack KVM Hypervisor", "sys_vendor": "Apache Software Foundation"}, True),
    ({"product_name": "CloudStack XenServer Hypervisor"}, True),
    ({"product_name": "Apache CloudStack"}, False),  # ds-identify's pattern is "CloudStack*"
    ({"sys_vendor": "CloudStack"}, False),
    ({"product_name": "Exoscale Compute Platform"}, False),
    ({}, False),
])
def test_detection_from_dmi_only(target, facts, found):
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    assert (CloudStack.why(context(target)) is not None) == found
    if not found:
        assert find_datasource(context(target), ["CloudStack"]).tried == []  # no request, no wait


def test_lease_files_as_cloud_init_reads_them(target):
    # the newest IPv4 lease of the first directory with files; dhclient6 and other names ignored
    two = dhclient_lease("10.1.1.1") + dhclient_lease("10.1.1.2")
    write_tree(target.top, {"var/lib/dhcp/dhclient.eth0.leases": two,
                            "var/lib/dhcp/dhclient6.eth0.leases": dhclient_lease("10.9.9.9"),
                            "var/lib/dhcp/notes.txt": "x"})
    newest = os.path.join(target.top, "var/lib/dhcp/dhclient6.eth0.leases")
    os.utime(newest, (time.time() + 100, time.time() + 100))
    assert latest_lease(context(target)) == "/var/lib/dhcp/dhclient.eth0.leases"
    assert lease_server(target.read_text("/var/lib/dhcp/dhclient.eth0.leases")) == "10.1.1.2"  # the last lease
    assert lease_server("ADDRESS=10.0.0.5\nSERVER_ADDRESS=10.0.0.1\n") == "10.0.0.1"  # NetworkManager's form
    assert lease_server("option dhcp-server-identifier;\n") is None  # truncated: nothing


def test_router_address_order(target):
    ctx = context(target)
    write_tree(target.top, {"proc/net/route": "Iface\tDestination\tGateway\tFlags\n"
                                              "eth0\t00000000\t0101010A\t0003\n"})
    assert router_address(ctx, 0.5) == ("10.1.1.1", "the default gateway")
    write_tree(target.top, {"var/lib/dhclient/dhclient--eth0.lease": dhclient_lease("10.1.1.7")})
    assert router_address(ctx, 0.5)[0] == "10.1.1.7"
    write_tree(target.top, {"run/systemd/netif/leases/2": "ADDRESS=10.1.1.5\nSERVER_ADDRESS=10.1.1.8\n"})
    assert router_address(ctx, 0.5)[0] == "10.1.1.8"
    write_tree(target.top, {"run/systemd/netif/leases/2": "SERVER_ADDRESS=not-an-address\n"})
    assert router_address(ctx, 0.5)[0] == "10.1.1.7"  # a hostile lease value is skipped


# ------------------------------------------------------------------- a guest against the server

@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    tmp = str(tmp_path_factory.mktemp("cs"))
    lab = CloudLab(tmp, IID, {"cloudstack": {"service_offering": "small-1c-1g"}}, USER_DATA,
                   listen=["ROUTER:80"], serve_extra=["--password-server-listen", "ROUTER:8080"])
    os.makedirs(lab.etc_netns, exist_ok=True)
    with open(f"{lab.etc_netns}/resolv.conf", "w") as f:  # data-server: no resolver answers here
        f.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
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


def guest_root(tmp_path, cloud, **files) -> str:
    write_tree(tmp_path, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI.items()})
    write_tree(tmp_path, {"var/lib/dhcp/dhclient.eth0.leases": dhclient_lease(cloud.lab.cloud_ip), **files})
    return str(tmp_path)


def test_reads_the_router_found_in_the_lease_and_its_password(cloud, tmp_path):
    set_password(cloud, PASSWORD)
    out = find_in_guest(cloud.lab, guest_root(tmp_path, cloud), ["CloudStack"])
    ds = out["ds"]
    assert ds is not None, out
    assert out["address"] == f"http://{cloud.lab.cloud_ip}"
    assert ds["metadata"]["instance-id"] == IID and ds["metadata"]["local-hostname"] == "lab-vm"
    assert ds["metadata"]["service-offering"] == "small-1c-1g"
    assert ds["availability_zone"] == "zone-a-1" and ds["public_keys"] == [KEY]
    assert ds["userdata_raw"] == USER_DATA
    assert ds["extra"]["cloud_config"] == {"ssh_pwauth": True, "password": PASSWORD, "chpasswd": {"expire": False}}
    assert PASSWORD not in str(ds["metadata"]) + str(ds["raw"])
    assert not password_set(cloud)  # acknowledged with saved_password: the server forgot it
    again = find_in_guest(cloud.lab, guest_root(tmp_path, cloud), ["CloudStack"])
    assert again["ds"] is not None and again["ds"]["extra"] == {}


def test_boot_sets_the_password_and_keeps_it_out_of_instance_data(cloud):
    set_password(cloud, PASSWORD)
    # (provision's root has no lease file: the router is configured; the lease is the test above's)
    root, data = provision(cloud, DMI, cfg="cloud_config_modules: [set_passwords]\n"
                           f"datasource: {{CloudStack: {{metadata_url: 'http://{cloud.lab.cloud_ip}/'}}}}\n")
    try:
        v1 = data["v1"]
        assert v1["cloud_name"] == "cloudstack" and v1["platform"] == "cloudstack"
        assert v1["instance_id"] == IID and v1["local_hostname"] == "lab-vm"
        assert v1["availability_zone"] == "zone-a-1" and v1["public_ssh_keys"] == [KEY]
        assert data["ds"]["extra"] == "redacted for non-root user"  # the world-readable copy
        with open(os.path.join(root.top, "run/cloudseed/instance-data.json")) as f:
            assert PASSWORD not in f.read()
        assert root.read("/etc/from-cloudstack-user-data") == "seen"
        proc = cloud.lab.guest_exec(PYTHON, "-m", "cloudseed", "--root", root.top, "modules", "--mode", "config",
                                    check=False, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        shadow = {line.split(":")[0]: line.split(":")[1] for line in root.read("/etc/shadow").splitlines()}
        assert matches(PASSWORD, shadow["debian"])  # the default user's password is the one served
        assert PASSWORD not in root.read("/var/log/cloudseed.log")
        assert not password_set(cloud)
    finally:
        root.close()


# ------------------------------------------------------------------------------ hostile servers


def ds_cfg(**section) -> dict:
    return {"datasource": {"CloudStack": {"max_wait": 2, "timeout": 2, "retries": 0, **section}}}


@pytest.mark.parametrize("reply,expected", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\nhalf-a-pass", "password server:"),  # closes mid-reply
    (None, "password server:"),  # accepts and never answers
    (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nbad_request", "bad_request"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nline\nline", "not a one-line password"),
])
def test_hostile_password_server_costs_a_bounded_wait_and_no_password(cloud, tmp_path, reply, expected):
    server = RawServer(cloud, 8081, reply)
    try:
        started = time.monotonic()
        out = find_in_guest(cloud.lab, guest_root(tmp_path, cloud), ["CloudStack"],
                            cfg=ds_cfg(password_server_port=8081))
        took = time.monotonic() - started
    finally:
        server.close()
    assert out["ds"] is not None, out  # the metadata was read: the instance still boots
    assert out["ds"]["extra"] == {}
    assert any(expected in w for w in out["warnings"]), out["warnings"]
    assert took < 15


def test_silent_metadata_server_is_a_bounded_wait(cloud, tmp_path):
    server = RawServer(cloud, 8082, None)
    try:
        root = guest_root(tmp_path, cloud)
        out = find_in_guest(cloud.lab, root, ["CloudStack"],
                            cfg=ds_cfg(metadata_url=f"http://{cloud.lab.cloud_ip}:8082/"))
    finally:
        server.close()
    assert out["ds"] is None and out["took"] < 8, out
    assert "no metadata service answered" in out["_stderr"]


def test_hostile_metadata_is_a_clear_error(cloud, tmp_path):
    listing = b"a/\n"  # every path is a directory holding another: an endless tree
    body = (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(listing)) + listing
    server = RawServer(cloud, 8083, body)
    try:
        out = find_in_guest(cloud.lab, guest_root(tmp_path, cloud), ["CloudStack"],
                            cfg=ds_cfg(metadata_url=f"http://{cloud.lab.cloud_ip}:8083"))
    finally:
        server.close()
    assert out["ds"] is None, out
    error = " ".join(out["errors"])
    assert f"{cloud.lab.cloud_ip}:8083" in error and "deeper than" in error, error


def test_no_router_anywhere_is_no_wait(target):
    started = time.monotonic()
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI.items()})
    search = find_datasource(context(target, ds_cfg()), ["CloudStack"])
    # this process's own /proc/net/route is not read (the target root has none), nor any lease
    assert search.datasource is None and time.monotonic() - started < 4


@pytest.mark.parametrize("facts,enabled", [({"product_name": "CloudStack KVM Hypervisor"}, True),
                                           ({"product_name": "KVM"}, False)])
def test_generators_enable_the_agent_on_cloudstack(tmp_path, facts, enabled):
    for kind, verdict in generators(str(tmp_path), facts).items():
        assert ("CloudStack (DMI" in verdict) == enabled, (kind, verdict)
        if enabled:
            assert verdict.startswith("enabled"), (kind, verdict)


@pytest.mark.skipif(not (shutil.which("dnsmasq") and shutil.which("dhclient")), reason="needs dnsmasq and dhclient")
def test_router_from_a_lease_dhclient_wrote(cloud, tmp_path):
    """A real DHCP exchange: dnsmasq in the cloud namespace (the router's address), ISC dhclient in
    the guest writing its lease file into the root (its script is /bin/true: nothing else changes)."""
    lab = cloud.lab
    work = tmp_path / "dhcp"
    work.mkdir()
    lab.start_in_cloud("dnsmasq", "--keep-in-foreground", "--no-daemon", "--port=0", "--bind-interfaces",
                       f"--interface={lab.cloud_if}", "--except-interface=lo", "--no-resolv", "--no-hosts",
                       f"--dhcp-range={lab.guest_ip},{lab.guest_ip},255.255.255.0,2m",
                       f"--dhcp-host={cloud.mac},{lab.guest_ip}", f"--dhcp-leasefile={work}/leases",
                       f"--pid-file={work}/dnsmasq.pid")
    root = tmp_path / "root"
    write_tree(root, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in DMI.items()})
    (root / "var/lib/dhcp").mkdir(parents=True)
    lease = root / "var/lib/dhcp" / f"dhclient.{lab.guest_if}.leases"
    try:
        lab.guest_exec("dhclient", "-1", "-4", "-sf", "/bin/true", "-lf", str(lease), "-pf", str(work / "dhclient.pid"),
                       lab.guest_if, timeout=40)
    finally:
        lab.guest_exec("dhclient", "-x", "-sf", "/bin/true", "-lf", str(lease), "-pf", str(work / "dhclient.pid"),
                       lab.guest_if, check=False, timeout=20)
    assert f"dhcp-server-identifier {lab.cloud_ip};" in lease.read_text()
    set_password(cloud, None)
    out = find_in_guest(lab, str(root), ["CloudStack"])
    assert out["ds"] is not None, out
    assert out["address"] == f"http://{lab.cloud_ip}" and out["ds"]["metadata"]["instance-id"] == IID
    assert f"the DHCP lease /var/lib/dhcp/dhclient.{lab.guest_if}.leases" in out["_stderr"]
