"""Azure as its guest reads it: IMDS (``/metadata/instance?api-version=...`` with ``Metadata: true``,
the user-data beside it as base64 text) and the wire server (168.63.129.16 unless DHCP names
another): the goal state with the ``x-ms-*`` headers, then a health report posted back.

Read by ``agent/datasources/azure.py`` and ``_azure_wireserver.py``; served by
``provider/server/apis/azure.py`` and ``_azure_wireserver.py``. The OVF environment on the
provisioning disc is not a wire contract (``_azure_ovf.py``).
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

METADATA = ("Metadata", "true")
WIRE = (("x-ms-agent-name", "cloudseed"), ("x-ms-version", "2012-11-30"))

CLOUD = Cloud(
    "azure", datasource="Azure",
    addresses=("http://169.254.169.254",),
    base="/metadata",
    prefixes=("/metadata/", "/machine"),
    versions=("2021-08-01",),
    names={"metadata": METADATA[0], "metadata_value": METADATA[1], "wire_server": "168.63.129.16",
           "wire_version": WIRE[1][0]},
    requests={
        "instance": Request("/metadata/instance", query="api-version={version}", sends=(METADATA,), form="json",
                            fields=("compute.vmId", "compute.name", "compute.location", "compute.publicKeys",
                                    "compute.osProfile.computerName", "network")),
        "user_data": Request("/metadata/instance/compute/userData", query="api-version={version}&format=text",
                             sends=(METADATA,), form="base64"),
        "goal_state": Request("/machine/", query="comp=goalstate", sends=WIRE, form="text"),
        "health": Request("/machine", method="POST", query="comp=health",
                          sends=(*WIRE, ("Content-Type", "text/xml; charset=utf-8"))),
    },
)
