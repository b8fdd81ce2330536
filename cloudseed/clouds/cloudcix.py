"""CloudCIX's metadata service as its guest reads it: ``/v1/metadata`` (JSON) and ``/v1/userdata`` (the
raw user-data), no header. ``/v1...`` is Vultr's and Akamai's too: the server tells them apart by
the instance's record.

Read by ``agent/datasources/cloudcix.py``, served by ``provider/server/apis/cloudcix.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "cloudcix", datasource="CloudCIX",
    addresses=("http://169.254.169.254",),
    base="/v1",
    prefixes=("/v1/",),
    requests={
        "meta_data": Request("/v1/metadata", form="json", fields=("instance_id", "local-hostname", "public-keys",
                                                                   "network")),
        "user_data": Request("/v1/userdata"),
    },
)
