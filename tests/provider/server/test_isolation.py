"""Which instance is asking: overlapping networks, spoofed headers, the signed proxy protocol."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from tests.provider.server.server_support import PROXY_SECRET, ServerProcess, http, new_address

PATHS = ["/openstack/latest/meta_data.json", "/openstack/latest/user_data", "/openstack/latest/password",
         "/openstack/latest/network_data.json", "/openstack/latest/vendor_data.json",
         "/latest/meta-data/instance-id", "/latest/user-data", "/latest/meta-data/public-keys/0/openssh-key",
         "/latest/dynamic/instance-identity/document", "/nocloud/meta-data", "/nocloud/user-data"]
# every EC2 category that can carry an instance's own data (the owner's values all contain "owner")
EC2_MD = "/latest/meta-data/"
MAC = "0a:0e:00:00:00:01"
NIC = f"{EC2_MD}network/interfaces/macs/{MAC}/"
PATHS += [EC2_MD + p for p in (
    "iam/info", "iam/security-credentials/", "iam/security-credentials/owner-role", "tags/instance/",
    "tags/instance/owner-tag", "security-groups", "placement/group-name", "placement/host-id", "spot/instance-action",
    "events/maintenance/scheduled", "events/maintenance/history", "identity-credentials/ec2/info",
    "identity-credentials/ec2/security-credentials/ec2-instance", "hostname", "local-hostname", "public-hostname",
    "product-codes", "instance-life-cycle", "services/domain", "network/interfaces/macs/", "mac")] + [
    NIC + p for p in ("security-groups", "security-group-ids", "subnet-id", "vpc-id", "local-hostname")] + [
    "/latest/dynamic/instance-identity/pkcs7", "/latest/dynamic/instance-identity/rsa2048",
    "/latest/dynamic/instance-identity/signature", "/latest/dynamic/instance-identity/"]
# GCE, DigitalOcean, Hetzner and Oracle (every request carries the headers GCE and Oracle v2 require)
PATHS += ["/computeMetadata/v1/instance/?recursive=true", "/computeMetadata/v1/instance/attributes/user-data",
          "/computeMetadata/v1/instance/hostname", "/metadata/v1.json", "/metadata/v1/hostname",
          "/metadata/v1/user-data", "/hetzner/v1/metadata", "/hetzner/v1/userdata", "/opc/v2/instance/",
          "/opc/v1/instance/", "/opc/v2/vnics/"]
CLOUD_HEADERS = {"Metadata-Flavor": "Google", "Authorization": "Bearer Oracle"}
OWNER_EC2 = {"iam_role": "owner-role", "security_groups": ["owner-sg"], "placement_group": "owner-pg",
             "host_id": "owner-host", "spot": {"action": "stop", "time": "2026-11-24T23:00:00Z"},
             "events": [{"description": "owner maintenance", "id": "owner-event"},
                        {"description": "owner past", "state": "completed"}],
             "product_codes": ["owner-code"], "subnet_ids": {"default": "subnet-owner"}, "vpc_id": "vpc-owner",
             "security_group_ids": ["sg-owner"]}


def test_overlapping_addresses_are_told_apart_by_listener_network(server):
    shared = new_address()
    server.add(instance_id="i-on-a", hostname="on-a", addresses=[{"address": shared, "network": "net-a"}],
               user_data="secret-a")
    server.add(instance_id="i-on-b", hostname="on-b", addresses=[{"address": shared, "network": "net-b"}],
               user_data="secret-b")
    port_a, port_b = server.ports[1], server.ports[2]
    assert http(port_a, "/latest/meta-data/instance-id", source=shared).text == "i-on-a"
    assert http(port_b, "/latest/meta-data/instance-id", source=shared).text == "i-on-b"
    assert http(port_a, "/openstack/latest/user_data", source=shared).text == "secret-a"
    assert http(port_b, "/nocloud/user-data", source=shared).text == "secret-b"
    # a listener without a network refuses to guess
    ambiguous = http(server.ports[0], "/latest/meta-data/instance-id", source=shared)
    assert ambiguous.status == 403 and "several networks" in ambiguous.text


def test_an_instance_never_sees_another_instances_data(server):
    owner = new_address()
    server.add(instance_id="i-owner", hostname="owner", addresses=[owner], user_data="owner-secret",
               ssh_keys=["ssh-ed25519 AAAAowner owner@x"], vendor_data={"v": "owner"}, macs=[MAC],
               tags={"owner-tag": "owner-value"}, ec2=OWNER_EC2)
    stranger = new_address()
    server.add(instance_id="i-stranger", hostname="stranger", addresses=[stranger])
    unknown = new_address()
    spoof = {"X-Forwarded-For": owner, "X-Instance-ID": "i-owner", "X-Neutron-Network-ID": "default",
             "X-Instance-ID-Signature": "0" * 64}
    for source, headers in ((stranger, CLOUD_HEADERS), (stranger, {**spoof, **CLOUD_HEADERS}),
                            (unknown, CLOUD_HEADERS), (unknown, {**spoof, **CLOUD_HEADERS})):
        for path in PATHS:
            reply = server.get(path, source, headers=headers)
            assert b"owner" not in reply.body, (source, path, reply.body)
        assert server.get("/nocloud/i-owner/user-data", source, headers=headers).status in (403, 404)
    # spoofed proxy headers from a non-proxy address are ignored: the stranger sees itself
    assert server.get("/latest/meta-data/instance-id", stranger, headers=spoof).text == "i-stranger"
    assert server.get("/latest/meta-data/instance-id", unknown).status == 404
    assert server.get("/latest/meta-data/instance-id", owner).text == "i-owner"
    # the owner does see its own (so the paths above are real ones), and credentials differ per instance
    for path in ("tags/instance/owner-tag", "events/maintenance/scheduled", f"network/interfaces/macs/{MAC}/vpc-id",
                 "placement/host-id", "iam/info"):
        assert b"owner" in server.get(EC2_MD + path, owner).body, path
    for path in ("/computeMetadata/v1/instance/attributes/user-data", "/metadata/v1/user-data",
                 "/hetzner/v1/userdata", "/opc/v2/instance/"):
        assert b"owner" in server.get(path, owner, headers=CLOUD_HEADERS).body, path
    assert server.get(EC2_MD + "spot/instance-action", owner).json()["action"] == "stop"
    assert server.get(EC2_MD + "spot/instance-action", stranger).status == 404
    mine = server.get(EC2_MD + "identity-credentials/ec2/security-credentials/ec2-instance", owner).json()
    theirs = server.get(EC2_MD + "identity-credentials/ec2/security-credentials/ec2-instance", stranger).json()
    assert mine["AccessKeyId"] != theirs["AccessKeyId"] and mine["Token"] != theirs["Token"]
    assert server.get(EC2_MD + "iam/security-credentials/owner-role", owner).json()["Code"] == "Success"
    signature = "/latest/dynamic/instance-identity/signature"
    assert server.get(signature, owner).text != server.get(signature, stranger).text


def sign(instance_id: str, secret: str = PROXY_SECRET) -> str:
    return hmac.new(secret.encode(), instance_id.encode(), hashlib.sha256).hexdigest()


@pytest.fixture(scope="module")
def proxied(db_url, tmp_path_factory):
    """A server trusting 127.0.0.2 (and only it) as a metadata proxy."""
    proc = ServerProcess(db_url, str(tmp_path_factory.mktemp("proxied")), ["127.0.0.1:0"],
                         config={"proxies": ["127.0.0.2/32"], "proxy_shared_secret": PROXY_SECRET,
                                 "rate_limit": 0})
    yield proc
    proc.stop()


def test_proxy_mode(proxied):
    guest = "10.20.0.5"
    proxied.add(instance_id="i-behind-proxy", hostname="behind", user_data="proxied-secret",
                addresses=[{"address": guest, "network": "tenant-net"}])
    proxy = "127.0.0.2"
    good = {"X-Forwarded-For": guest, "X-Neutron-Network-ID": "tenant-net", "X-Instance-ID": "i-behind-proxy",
            "X-Instance-ID-Signature": sign("i-behind-proxy")}
    assert proxied.get("/latest/meta-data/instance-id", proxy, headers=good).text == "i-behind-proxy"
    assert proxied.get("/openstack/latest/user_data", proxy, headers=good).text == "proxied-secret"
    bad = dict(good, **{"X-Instance-ID-Signature": sign("i-behind-proxy", "wrong-secret-0123456789")})
    reply = proxied.get("/openstack/latest/user_data", proxy, headers=bad)
    assert reply.status == 403 and b"proxied-secret" not in reply.body
    missing = {k: v for k, v in good.items() if k != "X-Instance-ID-Signature"}
    assert proxied.get("/openstack/latest/user_data", proxy, headers=missing).status == 403
    # a correctly signed id whose claimed address/network does not match is refused too
    wrong_net = dict(good, **{"X-Neutron-Network-ID": "other-net"})
    assert proxied.get("/openstack/latest/user_data", proxy, headers=wrong_net).status == 403
    # the same, perfectly signed headers from a non-proxy address are ignored
    assert proxied.get("/openstack/latest/user_data", "127.0.0.3", headers=good).status == 404
