"""Vultr's metadata service as its guest reads it: one JSON document, ``/v1.json``, asked with
``Metadata-Token: cloudinit`` as cloud-init does (the user-data also as text under ``/v1/``).

Read by ``agent/datasources/vultr.py``, served by ``provider/server/apis/vultr.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

ASKED_BY = (("Metadata-Token", "cloudinit"),)

CLOUD = Cloud(
    "vultr", datasource="Vultr",
    addresses=("http://169.254.169.254",),
    base="/v1",
    prefixes=("/v1/", "/v1.json"),
    requests={
        "document": Request("/v1.json", sends=ASKED_BY, form="json",
                            fields=("instanceid", "hostname", "public-keys", "region", "interfaces",
                                    "user-data")),
        "user_data": Request("/v1/user-data", sends=ASKED_BY),
    },
)
