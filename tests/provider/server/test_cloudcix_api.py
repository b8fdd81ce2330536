"""CloudCIX's metadata API from ``cloudseed serve`` on SQLite and PostgreSQL: ``/v1/metadata``
(JSON: ``instance_id``, netplan v2 ``network``) and ``/v1/userdata``, for records with
``clouds.cloudcix``.

No reference differential: CloudCIX's datasource is not in Debian's cloud-init 22.4 (added in
24.x); the document follows that datasource and its documented example.
"""

from __future__ import annotations

from tests.provider.server.server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"


def register(server, **extra):
    address = new_address()
    private = "10.10." + address.split(".", 2)[2]
    fields = {"instance_id": f"12_{address.replace('.', '_')}", "hostname": "cix-1",
              "addresses": [{"address": address, "network": "default", "mac": "ab:cd:ef:00:01:02", "prefix": 24},
                            {"address": private, "network": "private", "mac": "12:34:56:ab:cd:ef",
                             "prefix": 24}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA,
              "clouds": {"cloudcix": {"nameservers": ["10.0.0.1"], "search": ["cloudcix.com"]}}}
    fields.update(extra)
    server.add(**fields)
    return fields["instance_id"], address


def private_of(address):
    return "10.10." + address.split(".", 2)[2]


def test_metadata_and_userdata(server):
    instance_id, address = register(server)
    doc = server.get("/v1/metadata", address).json()
    assert doc["instance_id"] == instance_id == doc["instance-id"] and doc["local-hostname"] == "cix-1"
    assert doc["public-keys"] == [KEY]
    net = doc["network"]
    gateway = address.rsplit(".", 1)[0] + ".1"
    assert net == {"version": 2, "ethernets": {
        "eth0": {"match": {"macaddress": "ab:cd:ef:00:01:02"}, "set-name": "eth0", "addresses": [f"{address}/24"],
                 "routes": [{"to": "default", "via": gateway}],
                 "nameservers": {"addresses": ["10.0.0.1"], "search": ["cloudcix.com"]}},
        "eth1": {"match": {"macaddress": "12:34:56:ab:cd:ef"}, "set-name": "eth1",
                 "addresses": [f"{private_of(address)}/24"],
                 "nameservers": {"addresses": ["10.0.0.1"], "search": ["cloudcix.com"]}}}}
    assert server.get("/v1/userdata", address).text == USER_DATA
    assert server.get("/v1", address).text == "metadata\nuserdata\n"
    assert server.get("/v1/other", address).status == 404
    assert server.get("/v1/metadata", address, method="POST").status == 405


def test_defaults_and_isolation(server):
    _, one = register(server, user_data=None, clouds={"cloudcix": {}})
    _, two = register(server, hostname="cix-2")
    doc = server.get("/v1/metadata", one).json()
    gateway = one.rsplit(".", 1)[0] + ".1"
    assert doc["network"]["ethernets"]["eth0"]["nameservers"] == {"addresses": [gateway], "search": []}
    assert server.get("/v1/userdata", one).text == ""
    assert server.get("/v1/metadata", two).json()["local-hostname"] == "cix-2"
    assert server.get("/v1/metadata", new_address()).status == 404
