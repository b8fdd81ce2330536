"""DigitalOcean's droplet metadata service as its guest reads it: one JSON document, ``/metadata/v1.json``
(no header; the user-data also as text under ``/metadata/v1/``).

Read by ``agent/datasources/digitalocean.py``, served by ``provider/server/apis/digitalocean.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "digitalocean", datasource="DigitalOcean",
    addresses=("http://169.254.169.254",),
    base="/metadata/v1",
    prefixes=("/metadata/v1/", "/metadata/v1.json"),
    requests={
        "document": Request("/metadata/v1.json", form="json",
                            fields=("droplet_id", "hostname", "public_keys", "region", "interfaces", "dns")),
        "user_data": Request("/metadata/v1/user-data"),
    },
)
