"""MAAS's metadata service as its guest (a deployed machine) reads it: ``/MAAS/metadata/2012-03-01/``
files, each request signed with OAuth 1.0 (PLAINTEXT) by the machine's keys. Where it is comes
from the settings or the kernel command line, so there is no default address.

Read by ``agent/datasources/maas.py``, served by ``provider/server/apis/maas.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

PREFIX = "/MAAS/metadata"
VERSIONED = PREFIX + "/{version}/"

CLOUD = Cloud(
    "maas", datasource="MAAS",
    addresses=(),
    base=PREFIX + "/",
    prefixes=(PREFIX,),
    versions=("2012-03-01",),
    requests={  # in the order the guest asks; the first two must be there
        "instance_id": Request(VERSIONED + "meta-data/instance-id", signed="oauth"),
        "local_hostname": Request(VERSIONED + "meta-data/local-hostname", signed="oauth"),
        "public_keys": Request(VERSIONED + "meta-data/public-keys", signed="oauth"),
        "vendor_data": Request(VERSIONED + "meta-data/vendor-data", signed="oauth"),
        "user_data": Request(VERSIONED + "user-data", signed="oauth"),
    },
)
