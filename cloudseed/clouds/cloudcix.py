"""CloudCIX's metadata service as its guest reads it: ``/v1/metadata`` (JSON) and ``/v1/userdata`` (the
raw user-data), no header. ``/v1...`` is Vultr's and Akamai's too: the server tells them apart by
the instance's record.

Read by ``agent/datasources/cloudcix.py``, served by ``provider/server/apis/cloudcix.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# the document's fields, by role: the guest reads them (an ``_alt`` when the first is missing), the
# server writes them
FIELDS = {"instance_id": "instance-id", "instance_id_alt": "instance_id", "hostname": "local-hostname",
          "hostname_alt": "hostname", "public_keys": "public-keys", "network": "network"}

CLOUD = Cloud(
    "cloudcix", datasource="CloudCIX",
    addresses=("http://169.254.169.254",),
    base="/v1",
    prefixes=("/v1/",),
    fields=FIELDS,
    requests={
        "meta_data": Request("/v1/metadata", form="json",
                             fields=tuple(FIELDS[k] for k in ("instance_id_alt", "hostname", "public_keys",
                                                              "network"))),
        "user_data": Request("/v1/userdata"),
    },
)
