"""MAAS's metadata service as its guest (a deployed machine) reads it: ``/MAAS/metadata/2012-03-01/``
files, each request signed with OAuth 1.0 (PLAINTEXT) by the machine's keys. Where it is comes
from the settings or the kernel command line, so there is no default address.

Read by ``agent/datasources/maas.py``, served by ``provider/server/apis/maas.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

PREFIX = "/MAAS/metadata"
VERSIONED = PREFIX + "/{version}/"

# the ``meta-data/`` files' names (the guest keeps each under its name) and the vendor-data YAML's
# entry, by role: the datasource reads them, the server answers them
FIELDS = {"instance_id": "instance-id", "local_hostname": "local-hostname", "public_keys": "public-keys",
          "vendor_data": "vendor-data", "vendor_cloud_init": "cloud-init"}
META_DATA = VERSIONED + "meta-data/"

CLOUD = Cloud(
    "maas", datasource="MAAS",
    addresses=(),
    base=PREFIX + "/",
    prefixes=(PREFIX,),
    versions=("2012-03-01",),
    fields=FIELDS,
    requests={  # in the order the guest asks; the first two must be there
        **{role: Request(META_DATA + FIELDS[role], signed="oauth")
           for role in ("instance_id", "local_hostname", "public_keys", "vendor_data")},
        "user_data": Request(VERSIONED + "user-data", signed="oauth"),
    },
)
