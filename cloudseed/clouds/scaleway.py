"""Scaleway's instance metadata service as its guest reads it: ``/conf?format=json`` at 169.254.42.42,
and the user-data and vendor-data (``/user_data/cloud-init``, ``/vendor_data/cloud-init``), which
are answered only to a privileged source port (below 1024: root on the instance).

Read by ``agent/datasources/scaleway.py``, served by ``provider/server/apis/scaleway.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "scaleway", datasource="Scaleway",
    addresses=("http://169.254.42.42",),
    prefixes=("/conf", "/user_data", "/vendor_data"),
    names={"privileged_below": "1024"},
    requests={
        "conf": Request("/conf", query="format=json", form="json",
                        fields=("id", "hostname", "tags", "ssh_public_keys", "location.zone_id")),
        "user_data": Request("/user_data/cloud-init", privileged_port=True),
        "vendor_data": Request("/vendor_data/cloud-init", privileged_port=True),
    },
)
