"""UpCloud's metadata service as its guest reads it: one JSON document, ``/metadata/v1.json`` (the same
path as DigitalOcean's; the server tells them apart by the instance's record), user-data also as text.

Read by ``agent/datasources/upcloud.py``, served by ``provider/server/apis/upcloud.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# the document's fields, by role (nested ones too: the network's, an interface's, an address's): the
# guest reads them, the server writes them
FIELDS = {"instance_id": "instance_id", "hostname": "hostname", "public_keys": "public_keys", "region": "region",
          "network": "network", "user_data": "user_data", "vendor_data": "vendor_data", "cloud_name": "cloud_name",
          "platform": "platform", "subplatform": "subplatform", "storage": "storage", "disks": "disks",
          "tags": "tags", "interfaces": "interfaces", "dns": "dns", "index": "index", "mac": "mac",
          "network_id": "network_id", "type": "type", "ip_addresses": "ip_addresses", "address": "address",
          "dhcp": "dhcp", "family": "family", "ipv4_family": "IPv4", "ipv6_family": "IPv6", "floating": "floating",
          "gateway": "gateway", "address_network": "network"}

CLOUD = Cloud(
    "upcloud", datasource="UpCloud",
    addresses=("http://169.254.169.254",),
    base="/metadata/v1",
    prefixes=("/metadata/v1/", "/metadata/v1.json"),
    fields=FIELDS,
    requests={
        "document": Request("/metadata/v1.json", form="json",
                            fields=tuple(FIELDS[k] for k in ("instance_id", "hostname", "public_keys", "region",
                                                             "network"))),
        "user_data": Request("/metadata/v1/user_data"),
    },
)
