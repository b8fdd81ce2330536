"""Which API a metadata path belongs to: the one place that decides it.

``MetadataApp`` dispatches on it and the metrics count requests by it, so a request is always
counted under the API that answered it.
"""

from __future__ import annotations

OPENSTACK, NOCLOUD, PHONE_HOME, TOKEN, EC2 = "openstack", "nocloud", "phone_home", "token", "ec2"
GCE, DIGITALOCEAN, HETZNER, ORACLE, AZURE = "gce", "digitalocean", "hetzner", "oracle", "azure"
CLOUD_APIS = (GCE, DIGITALOCEAN, HETZNER, ORACLE, AZURE)  # each answered by provider/server/<api>_api.py: handle()
TOKEN_PATH = "/latest/api/token"


def api_of(path: str) -> str:
    """``openstack`` (/openstack...), ``nocloud``, ``phone_home``, ``token`` (the IMDSv2 token
    path), ``gce`` (/computeMetadata...), ``digitalocean`` (/metadata/v1...), ``hetzner``
    (/hetzner...), ``oracle`` (/opc...), ``azure`` (/metadata/..., /machine) or ``ec2`` (everything
    else: /, /latest/..., /2009-04-04/...)."""
    initial = path[1:2]  # one comparison for most EC2 paths ("/latest/...", "/2021-03-23/...")
    if initial == "o" and path.startswith("/openstack"):
        return OPENSTACK
    if initial == "n" and path.startswith("/nocloud"):
        return NOCLOUD
    if initial == "p" and path.startswith("/phone-home"):
        return PHONE_HOME
    if initial == "l" and path == TOKEN_PATH:
        return TOKEN
    if initial == "c" and path.startswith("/computeMetadata"):
        return GCE
    if initial == "m" and (path == "/metadata/v1" or path.startswith(("/metadata/v1/", "/metadata/v1.json"))):
        return DIGITALOCEAN
    if initial == "m" and path.startswith(("/metadata/", "/machine")):
        return AZURE  # IMDS (/metadata/instance, /metadata/attested) and the wire server (/machine)
    if initial == "h" and path.startswith("/hetzner"):
        return HETZNER
    if initial == "o" and path.startswith("/opc"):
        return ORACLE
    return EC2
