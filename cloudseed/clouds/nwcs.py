"""NWCS's metadata service as its guest reads it: one JSON document, ``/api/v1/metadata`` (its
``userdata``/``vendordata`` keys also served as text beside it), no header.

Read by ``agent/datasources/nwcs.py``, served by ``provider/server/apis/nwcs.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# the document's fields, by role: the guest reads them, the server writes them
FIELDS = {"instance_id": "instance-id", "hostname": "hostname", "public_keys": "public-keys", "network": "network",
          "user_data": "userdata", "vendor_data": "vendordata"}

CLOUD = Cloud(
    "nwcs", datasource="NWCS",
    addresses=("http://169.254.169.254",),
    base="/api/v1",
    prefixes=("/api/v1",),
    fields=FIELDS,
    requests={
        "document": Request("/api/v1/metadata", form="json",
                            fields=tuple(FIELDS[k] for k in ("instance_id", "hostname", "public_keys", "network",
                                                             "user_data"))),
        "user_data": Request("/api/v1/metadata/userdata"),
    },
)
