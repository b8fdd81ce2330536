"""DigitalOcean's droplet metadata service as its guest reads it: one JSON document, ``/metadata/v1.json``
(no header; the user-data also as text under ``/metadata/v1/``).

Read by ``agent/datasources/digitalocean.py``, served by ``provider/server/apis/digitalocean.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# the document's fields, by role (nested ones too: an interface's and an address's): the guest reads
# them, the server writes them; ``public`` and ``private`` are the interface kinds (keys and types)
FIELDS = {"instance_id": "droplet_id", "hostname": "hostname", "public_keys": "public_keys", "region": "region",
          "interfaces": "interfaces", "dns": "dns", "nameservers": "nameservers", "user_data": "user_data",
          "vendor_data": "vendor_data", "auth_key": "auth_key", "floating_ip": "floating_ip",
          "reserved_ip": "reserved_ip", "tags": "tags", "features": "features",
          "public": "public", "private": "private", "mac": "mac", "type": "type", "ipv4": "ipv4", "ipv6": "ipv6",
          "anchor_ipv4": "anchor_ipv4", "anchor_ipv6": "anchor_ipv6", "ip_address": "ip_address", "cidr": "cidr",
          "netmask": "netmask", "gateway": "gateway"}

CLOUD = Cloud(
    "digitalocean", datasource="DigitalOcean",
    addresses=("http://169.254.169.254",),
    base="/metadata/v1",
    prefixes=("/metadata/v1/", "/metadata/v1.json"),
    fields=FIELDS,
    requests={
        "document": Request("/metadata/v1.json", form="json",
                            fields=tuple(FIELDS[k] for k in ("instance_id", "hostname", "public_keys", "region",
                                                             "interfaces", "dns"))),
        "user_data": Request("/metadata/v1/user-data"),
    },
)
