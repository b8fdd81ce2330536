"""Hetzner Cloud's metadata service as its guest reads it: ``/hetzner/v1/metadata`` (a YAML document)
and ``/hetzner/v1/userdata`` (the raw user-data), no header.

Read by ``agent/datasources/hetzner.py``, served by ``provider/server/apis/hetzner.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "hetzner", datasource="Hetzner",
    addresses=("http://169.254.169.254",),
    base="/hetzner/v1",
    prefixes=("/hetzner",),
    requests={
        "meta_data": Request("/hetzner/v1/metadata", form="yaml",
                             fields=("instance-id", "hostname", "public-keys", "availability-zone", "region",
                                     "network-config")),
        "user_data": Request("/hetzner/v1/userdata"),
    },
)
