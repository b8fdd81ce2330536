"""RbxCloud's (Rootbox, HyperOne) metadata disk as its guest reads it: a filesystem labelled
``CLOUDMD`` (FAT, or ISO 9660) holding ``cloud.json`` (the machine, its network adapters and its
default user) and ``user.data``. No seed builder of ours writes it yet.

Read by ``agent/datasources/rbxcloud.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# cloud.json's fields, by role (the machine's, an adapter's, its network's, the user's)
FIELDS = {"vm": "vm", "instance_id": "_id", "name": "name", "adapters": "netadp", "mac": "macaddress",
          "ips": "ip", "address": "address", "network": "network", "netmask": "netmask", "gateway": "gateway",
          "dns": "dns", "nameservers": "nameservers", "extra": "additionalMetadata", "username": "username",
          "password": "password", "sha512": "sha512", "ssh_keys": "sshKeys"}

CLOUD = Cloud(
    "rbxcloud", datasource="RbxCloud", served=False,
    addresses=("CLOUDMD", "cloudmd"),  # filesystem labels
    fields=FIELDS,
    requests={
        "meta_data": Request("cloud.json", form="json", fields=(FIELDS["vm"], FIELDS["adapters"])),
        "user_data": Request("user.data"),
    },
)
