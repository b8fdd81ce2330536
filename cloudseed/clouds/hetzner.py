"""Hetzner Cloud's metadata service as its guest reads it: ``/hetzner/v1/metadata`` (a YAML document)
and ``/hetzner/v1/userdata`` (the raw user-data), no header.

Read by ``agent/datasources/hetzner.py``, served by ``provider/server/apis/hetzner.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# the document's fields, by role: the guest reads them, the server writes them
FIELDS = {"instance_id": "instance-id", "hostname": "hostname", "public_keys": "public-keys",
          "zone": "availability-zone", "region": "region", "network_config": "network-config",
          "vendor_data": "vendor_data", "public_ipv4": "public-ipv4", "local_ipv4": "local-ipv4"}

CLOUD = Cloud(
    "hetzner", datasource="Hetzner",
    addresses=("http://169.254.169.254",),
    base="/hetzner/v1",
    prefixes=("/hetzner",),
    fields=FIELDS,
    requests={
        "meta_data": Request("/hetzner/v1/metadata", form="yaml",
                             fields=tuple(FIELDS[k] for k in ("instance_id", "hostname", "public_keys", "zone",
                                                              "region", "network_config"))),
        "user_data": Request("/hetzner/v1/userdata"),
    },
)
