"""Akamai's (Linode's) metadata service as its guest reads it: ``PUT /v1/token`` with an expiry header,
then JSON documents under ``/v1/`` and the base64 user-data, each asked with the ``Metadata-Token``.

Read by ``agent/datasources/akamai.py``, served by ``provider/server/apis/akamai.py``. ``/v1...`` is
Vultr's and CloudCIX's too: the server tells them apart by the instance's record.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

TOKEN = "Metadata-Token"
EXPIRY = "Metadata-Token-Expiry-Seconds"
AS_JSON = ("Accept", "application/json")

# the fields the guest reads, by role (the instance document's, the ssh-keys document's); the server
# writes them from here
FIELDS = {"instance_id": "id", "label": "label", "region": "region", "users": "users"}

CLOUD = Cloud(
    "akamai", datasource="Akamai",
    addresses=("http://169.254.169.254", "http://[fd00:a9fe:a9fe::1]"),
    base="/v1",
    prefixes=("/v1/",),
    names={"token": TOKEN, "expiry": EXPIRY, "expiry_value": "300"},
    fields=FIELDS,
    requests={
        "token": Request("/v1/token", method="PUT", sends=((EXPIRY, "300"),)),
        "instance": Request("/v1/instance", sends=((TOKEN, None), AS_JSON), form="json",
                            fields=tuple(FIELDS[k] for k in ("instance_id", "label", "region"))),
        "ssh_keys": Request("/v1/ssh-keys", sends=((TOKEN, None), AS_JSON), form="json", fields=(FIELDS["users"],)),
        "network": Request("/v1/network", sends=((TOKEN, None), AS_JSON), form="json"),
        "user_data": Request("/v1/user-data", sends=((TOKEN, None),), form="base64"),
    },
)
