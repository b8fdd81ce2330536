"""Vultr's metadata API (``/v1.json``, ``/v1/``) from ``cloudseed serve``, on SQLite and PostgreSQL,
and Debian's cloud-init 22.4 DataSourceVultr reading it in namespaces.
"""

from __future__ import annotations

import ipaddress

from server_support import new_address

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"
USER_DATA = "#cloud-config\nhostname: from-user-data\n"
VENDOR = "#cloud-config\npackages: [htop]\n"


def register(server, **extra):
    address = new_address()
    instance_id = f"vultr-{address.replace('.', '-')}"
    public = "45." + address.split(".", 1)[1]
    octets = address.split(".")
    v6 = f"2001:19f0:5:28a7:5400:3ff:{int(octets[2]):x}:{int(octets[3]):x}"
    fields = {"instance_id": instance_id, "hostname": "vultr-1", "availability_zone": "ewr-1",
              "addresses": [{"address": public, "network": "default", "mac": "56:00:03:1b:4e:ca", "public": True,
                             "prefix": 23},
                            {"address": v6, "network": "default",
                             "mac": "56:00:03:1b:4e:ca", "prefix": 64},
                            {"address": address, "network": "vpc-1", "mac": "5a:00:03:1b:4e:ca", "prefix": 20}],
              "ssh_keys": [{"name": "alice", "data": KEY}], "user_data": USER_DATA, "vendor_data": VENDOR,
              "tags": {"web": ""},
              "clouds": {"vultr": {"country_code": "us", "startup_script": "#!/bin/sh\necho hi\n"}}}
    fields.update(extra)
    server.add(**fields)
    return instance_id, address, public, v6


def test_v1_json(server):
    instance_id, address, public, v6 = register(server)
    reply = server.get("/v1.json", address)
    assert reply.status == 200 and reply.headers["content-type"] == "application/json"
    doc = reply.json()
    assert doc["instance-v2-id"] == instance_id == doc["instanceid"] and doc["hostname"] == "vultr-1"
    assert doc["public-keys"] == [KEY] and doc["user-data"] == USER_DATA and doc["vendor-data"] == [VENDOR]
    assert doc["region"] == {"regioncode": "EWR", "countrycode": "US"} and doc["tags"] == ["web"]
    assert doc["startup-script"] == "#!/bin/sh\necho hi\n"
    pub, private = doc["interfaces"]
    assert pub["network-type"] == "public" and pub["mac"] == "56:00:03:1b:4e:ca"
    gateway = str(ipaddress.ip_interface(f"{public}/23").network.network_address + 1)
    assert pub["ipv4"] == {"additional": [], "address": public, "netmask": "255.255.254.0", "gateway": gateway}
    assert pub["ipv6"] == {"additional": [], "address": v6,
                           "network": "2001:19f0:5:28a7::", "prefix": "64"}
    assert private["network-type"] == "private" and private["mtu"] == 1450
    assert private["ipv4"]["address"] == address and private["ipv4"]["netmask"] == "255.255.240.0"
    assert private["ipv4"]["gateway"] == "" and private["networkid"] == "vpc-1"


def test_path_tree(server):
    instance_id, address, public, _ = register(server)
    listing = server.get("/v1/", address).text.splitlines()
    assert {"hostname", "instanceid", "instance-v2-id", "public-keys", "region/", "interfaces/",
            "user-data", "vendor-data"} <= set(listing)
    assert server.get("/v1/hostname", address).text == "vultr-1"
    assert server.get("/v1/instanceid", address).text == instance_id
    assert server.get("/v1/public-keys", address).text == KEY + "\n"
    assert server.get("/v1/region/regioncode", address).text == "EWR"
    assert server.get("/v1/interfaces/", address).text == "0/\n1/\n"
    assert server.get("/v1/interfaces/0/ipv4/address", address).text == public
    assert server.get("/v1/interfaces/1/mtu", address).text == "1450"
    assert server.get("/v1/user-data", address).text == USER_DATA
    assert server.get("/v1/nothing", address).status == 404
    assert server.get("/v1/interfaces/7", address).status == 404
    assert server.get("/v1.json", address, method="POST").status == 405


def test_no_user_data_no_vendor_data_and_a_nic_without_ipv4(server):
    address = new_address()
    server.add(instance_id=f"vultr-bare-{address}", hostname="", availability_zone="ams",
               macs=["56:00:00:00:00:01", "5a:00:00:00:00:09"],
               addresses=[{"address": address, "network": "default"}])
    doc = server.get("/v1.json", address).json()
    assert doc["user-data"] == "" and doc["vendor-data"] == [] and doc["region"] == {"regioncode": "AMS"}
    pub, private = doc["interfaces"]
    assert pub["ipv4"]["address"] == address and pub["ipv4"]["netmask"] == "255.255.254.0"
    assert pub["ipv6"] == {"additional": [], "address": "", "network": "", "prefix": ""}
    assert private["unconfigured"] is True and private["ipv4"]["address"] == ""
