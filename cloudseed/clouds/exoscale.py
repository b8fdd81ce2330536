"""Exoscale's metadata service as its guest reads it: CloudStack's, at version ``1.0``:
``/1.0/meta-data/`` (crawled), ``/1.0/user-data``; the password server on port 8080 with
CloudStack's ``DomU_Request`` header (``clouds/cloudstack.py``).

Read by ``agent/datasources/exoscale.py``, served by ``provider/server/apis/exoscale.py``. The paths
are EC2's family: the server tells them apart by the instance's record.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "exoscale", datasource="Exoscale",
    addresses=("http://169.254.169.254",),
    versions=("1.0",),
    names={"password_port": "8080"},
    requests={
        "meta_data": Request("/{version}/meta-data/", form="listing",
                             fields=("instance-id", "local-hostname", "public-keys", "availability-zone")),
        "user_data": Request("/{version}/user-data"),
    },
)
