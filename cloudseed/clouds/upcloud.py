"""UpCloud's metadata service as its guest reads it: one JSON document, ``/metadata/v1.json`` (the same
path as DigitalOcean's; the server tells them apart by the instance's record), user-data also as text.

Read by ``agent/datasources/upcloud.py``, served by ``provider/server/apis/upcloud.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "upcloud", datasource="UpCloud",
    addresses=("http://169.254.169.254",),
    base="/metadata/v1",
    prefixes=("/metadata/v1/", "/metadata/v1.json"),
    requests={
        "document": Request("/metadata/v1.json", form="json",
                            fields=("instance_id", "hostname", "public_keys", "region", "network")),
        "user_data": Request("/metadata/v1/user_data"),
    },
)
