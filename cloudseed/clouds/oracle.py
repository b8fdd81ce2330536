"""Oracle Cloud's instance metadata service (IMDS) as its guest reads it: ``/opc/v2/`` with
``Authorization: Bearer Oracle``, ``/opc/v1/`` (no header) when v2 fails; the instance document
and the VNICs, JSON.

Read by ``agent/datasources/oracle.py``, served by ``provider/server/apis/oracle.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

BEARER = ("Authorization", "Bearer Oracle")  # v2's; v1 asks without it

CLOUD = Cloud(
    "oracle", datasource="Oracle",
    addresses=("http://169.254.169.254",),
    base="/opc",
    versions=("v2", "v1"),
    names={"v2_header": BEARER[0], "v2_value": BEARER[1]},
    requests={
        "instance": Request("/opc/{version}/instance/", sends=(BEARER,), form="json",
                            fields=("id", "hostname", "displayName", "ociAdName", "canonicalRegionName",
                                    "metadata.ssh_authorized_keys", "metadata.user_data")),
        "vnics": Request("/opc/{version}/vnics/", sends=(BEARER,), form="json"),
        "user_data": Request("/opc/{version}/instance/metadata/user_data", sends=(BEARER,), form="base64"),
    },
)
