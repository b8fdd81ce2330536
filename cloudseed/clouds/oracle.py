"""Oracle Cloud's instance metadata service (IMDS) as its guest reads it: ``/opc/v2/`` with
``Authorization: Bearer Oracle``, ``/opc/v1/`` (no header) when v2 fails; the instance document
and the VNICs, JSON.

Read by ``agent/datasources/oracle.py``, served by ``provider/server/apis/oracle.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

BEARER = ("Authorization", "Bearer Oracle")  # v2's; v1 asks without it

# the fields the guest reads, by role (the instance document's, its ``metadata``'s and a VNIC's); the
# server writes them from here
FIELDS = {"instance_id": "id", "hostname": "hostname", "display_name": "displayName", "zone": "ociAdName",
          "canonical_region": "canonicalRegionName", "region": "region", "metadata": "metadata",
          "ssh_keys": "ssh_authorized_keys", "user_data": "user_data",
          "mac": "macAddr", "private_ip": "privateIp", "subnet": "subnetCidrBlock"}

CLOUD = Cloud(
    "oracle", datasource="Oracle",
    addresses=("http://169.254.169.254",),
    base="/opc",
    versions=("v2", "v1"),
    names={"v2_header": BEARER[0], "v2_value": BEARER[1]},
    fields=FIELDS,
    requests={
        "instance": Request("/opc/{version}/instance/", sends=(BEARER,), form="json",
                            fields=(*(FIELDS[k] for k in ("instance_id", "hostname", "display_name", "zone",
                                                          "canonical_region")),
                                    *(f"{FIELDS['metadata']}.{FIELDS[k]}" for k in ("ssh_keys", "user_data")))),
        "vnics": Request("/opc/{version}/vnics/", sends=(BEARER,), form="json"),
        "user_data": Request("/opc/{version}/instance/metadata/user_data", sends=(BEARER,), form="base64"),
    },
)
