"""NWCS's metadata service as its guest reads it: one JSON document, ``/api/v1/metadata`` (its
``userdata``/``vendordata`` keys also served as text beside it), no header.

Read by ``agent/datasources/nwcs.py``, served by ``provider/server/apis/nwcs.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "nwcs", datasource="NWCS",
    addresses=("http://169.254.169.254",),
    base="/api/v1",
    prefixes=("/api/v1",),
    requests={
        "document": Request("/api/v1/metadata", form="json",
                            fields=("instance-id", "hostname", "public-keys", "network", "userdata")),
        "user_data": Request("/api/v1/metadata/userdata"),
    },
)
