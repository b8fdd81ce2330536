"""OpenStack, EC2 (with IMDSv2) and NoCloud answers over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import json
import subprocess
import time

import yaml

from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"


def register(server, **extra):
    address = new_address()
    instance_id = f"i-{address.replace('.', '-')}"
    fields = {"instance_id": instance_id, "hostname": f"vm-{address.split('.')[-1]}",
              "addresses": [{"address": address, "network": "default", "mac": "52:54:00:12:34:56"}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA,
              "vendor_data": {"cloud-init": "#cloud-config\npackages: [htop]\n"}, "availability_zone": "az1",
              "project_id": "proj-1", "meta": {"role": "web"}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address


def test_openstack_versions_and_files(server):
    instance_id, address = register(server)
    versions = server.get("/openstack", address).text.splitlines()
    assert versions[0] == "2012-08-10" and "2018-08-27" in versions and versions[-1] == "latest"
    assert server.get("/openstack/", address).text.splitlines() == versions
    assert server.get("/openstack/2012-08-10/", address).text.splitlines() == ["meta_data.json", "user_data"]
    latest = server.get("/openstack/latest", address).text.splitlines()
    assert set(latest) == {"meta_data.json", "user_data", "password", "vendor_data.json", "network_data.json",
                           "vendor_data2.json"}
    # files only from the version that introduced them
    assert server.get("/openstack/2013-04-04/vendor_data.json", address).status == 404
    assert server.get("/openstack/2013-10-17/vendor_data.json", address).json() == {
        "cloud-init": "#cloud-config\npackages: [htop]\n"}
    assert server.get("/openstack/2013-10-17/network_data.json", address).status == 404
    assert server.get("/openstack/2016-06-30/vendor_data2.json", address).status == 404
    assert server.get("/openstack/2016-10-06/vendor_data2.json", address).json() == {}
    assert server.get("/openstack/2012-08-10/password", address).status == 404


def test_openstack_meta_data_json(server):
    instance_id, address = register(server)
    meta = server.get("/openstack/latest/meta_data.json", address).json()
    assert meta["uuid"] == instance_id and meta["hostname"].startswith("vm-")
    assert meta["availability_zone"] == "az1" and meta["project_id"] == "proj-1" and meta["meta"] == {"role": "web"}
    assert meta["public_keys"] == {"alice": KEY}
    assert meta["keys"] == [{"name": "alice", "type": "ssh", "data": KEY}]  # Nova: "ssh", not the algorithm
    assert meta["launch_index"] == 0 and meta["devices"] == [] and meta["files"] == []
    assert len(base64.b64decode(meta["random_seed"])) == 512
    again = server.get("/openstack/latest/meta_data.json", address).json()
    assert again["random_seed"] != meta["random_seed"]  # fresh on every request
    old = server.get("/openstack/2012-08-10/meta_data.json", address).json()
    assert "random_seed" not in old and "project_id" not in old and "devices" not in old


def test_openstack_user_data_and_network_data(server):
    instance_id, address = register(server)
    reply = server.get("/openstack/latest/user_data", address)
    assert reply.status == 200 and reply.text == USER_DATA
    net = server.get("/openstack/latest/network_data.json", address).json()
    assert net["links"][0]["ethernet_mac_address"] == "52:54:00:12:34:56"
    assert net["networks"][0]["type"] == "ipv4_dhcp" and net["services"] == []
    _, bare = register(server, user_data=None)
    assert server.get("/openstack/latest/user_data", bare).status == 404
    assert "user_data" not in server.get("/openstack/latest/", bare).text.splitlines()


def test_openstack_password_post_once_then_409_and_operator_clear(server):
    instance_id, address = register(server)
    assert server.get("/openstack/latest/password", address).text == ""
    assert server.get("/openstack/latest/password", address, method="POST", body="x" * 1021).status == 400
    assert server.get("/openstack/latest/password", address, method="POST", body="s3cret").status == 200
    assert server.get("/openstack/latest/password", address).text == "s3cret"
    second = server.get("/openstack/latest/password", address, method="POST", body="other")
    assert second.status == 409 and "already set" in second.text
    assert server.admin("DELETE", f"/v1/instances/{instance_id}/password").status == 204
    deadline = time.monotonic() + 2
    while server.get("/openstack/latest/password", address).text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.get("/openstack/latest/password", address, method="POST", body="x" * 1020).status == 200


def test_password_post_repeated_with_the_same_value_is_not_a_conflict_unlike_nova(server):
    """Nova answers 409 to any second POST. Here the same password again is a 200 and changes
    nothing: a guest whose first POST got a 503 (the registry was unavailable, maybe after the
    write committed) retries safely; another value is still a 409."""
    instance_id, address = register(server)
    assert server.get("/openstack/latest/password", address, method="POST", body="once").status == 200
    for _ in range(2):
        assert server.get("/openstack/latest/password", address, method="POST", body="once").status == 200
    assert server.get("/openstack/latest/password", address, method="POST", body="twice").status == 409
    assert server.get("/openstack/latest/password", address).text == "once"


def test_ec2_tree(server):
    instance_id, address = register(server, tags=["web"])
    root = server.get("/", address).text.splitlines()
    assert "2009-04-04" in root and "2021-03-23" in root and root[-1] == "latest"
    assert server.get("/latest/", address).text.splitlines() == ["dynamic", "meta-data", "user-data"]
    listing = server.get("/2009-04-04/meta-data/", address).text.splitlines()
    for entry in ("ami-id", "ami-launch-index", "hostname", "local-hostname", "local-ipv4", "instance-id",
                  "instance-type", "reservation-id", "security-groups", "placement/", "public-keys/",
                  "block-device-mapping/"):
        assert entry in listing
    assert "network/" not in listing  # introduced 2011-01-01
    assert server.get("/latest/meta-data/instance-id", address).text == instance_id
    assert server.get("/latest/meta-data/local-ipv4", address).text == address
    assert server.get("/latest/meta-data/placement/availability-zone", address).text == "az1"
    assert server.get("/latest/meta-data/public-keys/", address).text == "0=alice"
    assert server.get("/latest/meta-data/public-keys/0/", address).text == "openssh-key"
    assert server.get("/latest/meta-data/public-keys/0/openssh-key", address).text == KEY
    assert server.get("/latest/meta-data/block-device-mapping/", address).text.splitlines() == ["ami", "root"]
    mac = "52:54:00:12:34:56"
    assert server.get("/latest/meta-data/network/interfaces/macs/", address).text == f"{mac}/"
    assert server.get(f"/latest/meta-data/network/interfaces/macs/{mac}/local-ipv4s", address).text == address
    assert server.get("/latest/meta-data/tags/instance/", address).text == "web"
    assert server.get("/latest/user-data", address).text == USER_DATA
    identity = server.get("/latest/dynamic/instance-identity/document", address).json()
    assert identity["instanceId"] == instance_id and identity["privateIp"] == address
    _, bare = register(server, user_data=None, ssh_keys=[])
    assert server.get("/latest/user-data", bare).status == 404
    assert "public-keys/" not in server.get("/latest/meta-data/", bare).text.splitlines()


def test_public_ipv4_only_when_registered(server):
    private = new_address()
    server.add(instance_id="i-public", hostname="pub", addresses=[
        {"address": private, "network": "default"}, {"address": "203.0.113.9", "network": "ext", "public": True}])
    assert server.get("/latest/meta-data/public-ipv4", private).text == "203.0.113.9"
    assert server.get("/latest/meta-data/local-ipv4", private).text == private
    _, other = register(server)
    assert server.get("/latest/meta-data/public-ipv4", other).status == 404


def test_imdsv2_tokens(server):
    instance_id, address = register(server, imds_tokens="required")
    assert server.get("/latest/meta-data/instance-id", address).status == 401
    assert server.get("/", address).status == 401
    put = lambda headers: server.get("/latest/api/token", address, method="PUT", headers=headers)  # noqa: E731
    assert put({}).status == 400
    for bad in ("0", "21601", "abc", "-5"):
        reply = put({"X-aws-ec2-metadata-token-ttl-seconds": bad})
        assert reply.status == 400 and "1 to 21600" in reply.text
    assert put({"X-aws-ec2-metadata-token-ttl-seconds": "60", "X-Forwarded-For": "10.9.9.9"}).status == 403
    assert server.get("/latest/api/token", address).status == 405
    token = put({"X-aws-ec2-metadata-token-ttl-seconds": "21600"})
    assert token.status == 200 and token.headers["x-aws-ec2-metadata-token-ttl-seconds"] == "21600"
    good = {"X-aws-ec2-metadata-token": token.text}
    assert server.get("/latest/meta-data/instance-id", address, headers=good).text == instance_id
    assert server.get("/latest/meta-data/instance-id", address,
                      headers={"X-aws-ec2-metadata-token": token.text[:-2] + "00"}).status == 401
    # a token is bound to its instance: another instance cannot use it, even where v1 is allowed
    _, other = register(server)
    assert server.get("/latest/meta-data/instance-id", other).status == 200  # IMDSv1 allowed there
    assert server.get("/latest/meta-data/instance-id", other, headers=good).status == 401
    # expiry is tested with an injected clock, without sleeping: test_clocks.py


def test_nocloud(server):
    instance_id, address = register(server)
    meta = yaml.safe_load(server.get("/nocloud/meta-data", address).text)
    assert meta == {"instance-id": instance_id, "local-hostname": meta["local-hostname"], "public-keys": [KEY]}
    assert server.get("/nocloud/user-data", address).text == USER_DATA
    assert server.get("/nocloud/vendor-data", address).text == "#cloud-config\npackages: [htop]\n"
    netcfg = yaml.safe_load(server.get("/nocloud/network-config", address).text)
    assert netcfg["version"] == 2 and netcfg["ethernets"]["eth0"]["dhcp4"] is True
    assert server.get(f"/nocloud/{instance_id}/meta-data", address).status == 200
    assert server.get("/nocloud/other-instance/meta-data", address).status == 403
    _, bare = register(server, user_data=None)
    assert server.get("/nocloud/user-data", bare).status == 200  # NoCloud needs the file, even empty


def test_unknown_paths_versions_and_methods(server):
    _, address = register(server)
    for path in ("/openstack/2011-01-01/meta_data.json", "/openstack/latest/nope", "/1999-01-01/meta-data/",
                 "/latest/meta-data/nope", "/latest/meta-data/public-keys/7/openssh-key", "/latest/nope",
                 "/nocloud/a/b/c", "/openstack/latest/meta_data.json/x", "/openstackx"):
        assert server.get(path, address).status == 404, path
    for method, path in (("POST", "/openstack/latest/meta_data.json"), ("DELETE", "/latest/meta-data/"),
                         ("PUT", "/nocloud/meta-data"), ("GET", "/phone-home"),
                         ("DELETE", "/openstack/latest/password")):
        reply = server.get(path, address, method=method)
        assert reply.status == 405 and "allow" in reply.headers, (method, path)
    head = server.get("/latest/meta-data/instance-id", address, method="HEAD")
    assert head.status == 200 and head.body == b"" and int(head.headers["content-length"]) > 0


def test_malformed_requests_get_400_naming_the_problem(server):
    _, address = register(server)
    import socket

    for raw, expected in ((b"GARBAGE\r\n\r\n", b"malformed request line"),
                          (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", b"malformed header line"),
                          (b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", b"Content-Length"),
                          (b"GET / HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", b"larger than")):
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(raw)
            data = sock.recv(4096)
        assert data.split(b" ")[1] in (b"400", b"431") and expected in data, data


def test_keep_alive_and_pipelining(server):
    import socket

    instance_id, address = register(server)
    with socket.create_connection(("127.0.0.1", server.port), source_address=(address, 0)) as sock:
        sock.sendall(b"GET /latest/meta-data/instance-id HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
        data = b""
        while data.count(instance_id.encode()) < 3:
            chunk = sock.recv(65536)
            assert chunk
            data += chunk
    assert data.count(b"HTTP/1.1 200 OK") == 3


def test_phone_home_stored_with_instance(server):
    instance_id, address = register(server)
    form = f"instance_id={instance_id}&hostname=vm&fqdn=vm.example&pub_key_ed25519=ssh-ed25519+AAAA"
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    assert server.get(f"/phone-home/{instance_id}", address, method="POST", body=form, headers=headers).status == 200
    assert server.get("/phone-home", address, method="POST", body="instance_id=i-someone-else",
                      headers=headers).status == 403
    assert server.get("/phone-home/i-someone-else", address, method="POST", body="", headers=headers).status == 403
    posts = server.admin("GET", f"/v1/instances/{instance_id}/phone-home").json()
    assert len(posts) == 1 and posts[0]["source"] == address
    assert posts[0]["fields"] == {"instance_id": instance_id, "hostname": "vm", "fqdn": "vm.example",
                                  "pub_key_ed25519": "ssh-ed25519 AAAA"}


def test_curl_as_a_client(server):
    instance_id, address = register(server)
    out = subprocess.run(["curl", "-sS", "--interface", address, "-H", "Connection: close",
                          f"http://127.0.0.1:{server.port}/openstack/latest/meta_data.json"],
                         capture_output=True, text=True, check=True, timeout=10).stdout
    assert json.loads(out)["uuid"] == instance_id
    token = subprocess.run(["curl", "-sS", "--interface", address, "-X", "PUT", "-H",
                            "X-aws-ec2-metadata-token-ttl-seconds: 30",
                            f"http://127.0.0.1:{server.port}/latest/api/token"],
                           capture_output=True, text=True, check=True, timeout=10).stdout
    out = subprocess.run(["curl", "-sS", "--interface", address, "-H", f"X-aws-ec2-metadata-token: {token}",
                          f"http://127.0.0.1:{server.port}/latest/meta-data/hostname"],
                         capture_output=True, text=True, check=True, timeout=10).stdout
    assert out.startswith("vm-")
