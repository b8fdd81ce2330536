"""Which API a metadata path belongs to: the one place that decides it.

``MetadataApp`` dispatches on it and the metrics count requests by it, so a request is always
counted under the API that answered it.
"""

from __future__ import annotations

from cloudseed.clouds import azure as _azure
from cloudseed.clouds import digitalocean as _digitalocean
from cloudseed.clouds import gce as _gce
from cloudseed.clouds import hetzner as _hetzner
from cloudseed.clouds import maas as _maas
from cloudseed.clouds import nocloud as _nocloud
from cloudseed.clouds import nwcs as _nwcs
from cloudseed.clouds import openstack as _openstack
from cloudseed.clouds import oracle as _oracle
from cloudseed.clouds import scaleway as _scaleway
from cloudseed.clouds import served
from cloudseed.clouds import vultr as _vultr
from cloudseed.clouds.ec2 import CLOUD as EC2_CLOUD

OPENSTACK, NOCLOUD, PHONE_HOME, TOKEN, EC2 = "openstack", "nocloud", "phone_home", "token", "ec2"
PROVISIONING = "provisioning"  # an instance's own provisioning reports (provisioning_api.py)
GCE, DIGITALOCEAN, HETZNER, ORACLE, AZURE = "gce", "digitalocean", "hetzner", "oracle", "azure"
VULTR, SCALEWAY, UPCLOUD, NWCS, AKAMAI = "vultr", "scaleway", "upcloud", "nwcs", "akamai"
CLOUDSTACK, EXOSCALE, ALIYUN, CLOUDCIX, MAAS = "cloudstack", "exoscale", "aliyun", "cloudcix", "maas"
# every served cloud (cloudseed/clouds/<name>.py) but the three MetadataApp answers itself (EC2,
# OpenStack, NoCloud): each answered by provider/server/apis/<name>.py: handle(app, request, instance)
CLOUD_APIS = frozenset(served()) - {EC2, OPENSTACK, NOCLOUD}
TOKEN_PATH = EC2_CLOUD.requests["token"].path
# the path families of the clouds' contracts (clouds/<name>.py: base, prefixes)
_GCE, _HETZNER, _NWCS, _ORACLE = (c.CLOUD.prefixes for c in (_gce, _hetzner, _nwcs, _oracle))
_DIGITALOCEAN, _DIGITALOCEAN_ROOT = _digitalocean.CLOUD.prefixes, _digitalocean.CLOUD.base
_VULTR, _VULTR_ROOT = _vultr.CLOUD.prefixes, _vultr.CLOUD.base
_AZURE, _SCALEWAY, _MAAS = _azure.CLOUD.prefixes, _scaleway.CLOUD.prefixes, _maas.CLOUD.prefixes
OPENSTACK_PREFIX = _openstack.CLOUD.prefixes[0]  # /openstack
NOCLOUD_PREFIX = _nocloud.CLOUD.prefixes[0]  # /nocloud

# Path families that several platforms use: the family's own API answers unless the instance's record
# names (in its ``clouds`` settings) one of the others, in this order. ``/metadata/v1.json`` is
# DigitalOcean's and UpCloud's; ``/v1...`` Vultr's, Akamai's and CloudCIX's; the EC2-shaped paths
# (``/latest/meta-data/...``, ``/2016-01-01/...``) EC2's, CloudStack's, Exoscale's and AliYun's.
SHARED_FAMILIES: dict[str, tuple[str, ...]] = {
    DIGITALOCEAN: (UPCLOUD,),
    VULTR: (AKAMAI, CLOUDCIX),
    EC2: (EXOSCALE, CLOUDSTACK, ALIYUN),
}


def api_for(path: str, clouds: object, query: str = "") -> str:
    """The API that answers ``path`` for an instance whose record has these ``clouds`` settings (a
    mapping, or None): ``api_of(path)`` unless the path's family is shared and the record names
    one of the family's other platforms. ``/?comp=versions`` is Azure's wire server's version list."""
    if query and path == "/" and query[:13].lower() == "comp=versions":
        return AZURE
    api = api_of(path)
    if clouds:
        for other in SHARED_FAMILIES.get(api, ()):
            if other in clouds:  # type: ignore[operator]
                return other
    return api


def api_of(path: str) -> str:
    """``openstack`` (/openstack...), ``nocloud``, ``phone_home``, ``provisioning`` (/cloudseed/...),
    ``token`` (the IMDSv2 token
    path), ``gce`` (/computeMetadata...), ``digitalocean`` (/metadata/v1...), ``hetzner``
    (/hetzner...), ``oracle`` (/opc...), ``azure`` (/metadata/..., /machine), ``vultr`` (/v1.json,
    /v1/...), ``scaleway`` (/conf, /user_data, /vendor_data), ``nwcs`` (/api/v1/...), ``maas``
    (/MAAS/...) or ``ec2`` (everything else: /, /latest/..., /2009-04-04/...). Shared families are
    resolved per instance by ``api_for``."""
    initial = path[1:2]  # one comparison for most EC2 paths ("/latest/...", "/2021-03-23/...")
    if initial == "o" and path.startswith(OPENSTACK_PREFIX):
        return OPENSTACK
    if initial == "n" and path.startswith(NOCLOUD_PREFIX):
        return NOCLOUD
    if initial == "p" and path.startswith("/phone-home"):
        return PHONE_HOME
    if initial == "c" and path.startswith("/cloudseed/"):
        return PROVISIONING
    if initial == "l" and path == TOKEN_PATH:
        return TOKEN
    if initial == "c" and path.startswith(_GCE):
        return GCE
    if initial == "m" and (path == _DIGITALOCEAN_ROOT or path.startswith(_DIGITALOCEAN)):
        return DIGITALOCEAN
    if initial == "m" and path.startswith(_AZURE):
        return AZURE  # IMDS (/metadata/instance, /metadata/attested) and the wire server (/machine)
    if initial == "h" and path.startswith(_HETZNER):
        return HETZNER
    if initial == "o" and path.startswith(_ORACLE):
        return ORACLE
    if initial == "v" and (path == _VULTR_ROOT or path.startswith(_VULTR)):
        return VULTR
    if initial == "a" and path.startswith(_NWCS):
        return NWCS
    if initial == "M" and path.startswith(_MAAS):
        return MAAS
    if initial in "cuv" and path.startswith(_SCALEWAY):  # /conf, /user_data, /vendor_data
        return SCALEWAY
    return EC2
