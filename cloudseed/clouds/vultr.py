"""Vultr's metadata service as its guest reads it: one JSON document, ``/v1.json``, asked with
``Metadata-Token: cloudinit`` as cloud-init does (the user-data also as text under ``/v1/``).

Read by ``agent/datasources/vultr.py``, served by ``provider/server/apis/vultr.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

ASKED_BY = (("Metadata-Token", "cloudinit"),)

# the document's fields, by role (nested ones too: the region's, an interface's, an address's): the
# guest reads them (``instance_id_v1`` when ``instance_id`` is missing), the server writes them
FIELDS = {"instance_id": "instance-v2-id", "instance_id_v1": "instanceid", "hostname": "hostname",
          "public_keys": "public-keys", "region": "region", "country_code": "countrycode",
          "region_code": "regioncode", "interfaces": "interfaces", "cloud_interfaces": "cloud_interfaces",
          "user_data": "user-data", "vendor_data": "vendor-data", "startup_script": "startup-script",
          "tags": "tags", "user_defined": "user-defined",
          "mac": "mac", "network_type": "network-type", "network_id": "network-v2-id", "network_id_v1": "networkid",
          "unconfigured": "unconfigured", "mtu": "mtu", "accept_ra": "accept-ra", "routes": "routes",
          "ipv4": "ipv4", "ipv6": "ipv6", "address": "address", "netmask": "netmask", "gateway": "gateway",
          "network": "network", "prefix": "prefix", "additional": "additional"}

CLOUD = Cloud(
    "vultr", datasource="Vultr",
    addresses=("http://169.254.169.254",),
    base="/v1",
    prefixes=("/v1/", "/v1.json"),
    fields=FIELDS,
    requests={
        "document": Request("/v1.json", sends=ASKED_BY, form="json",
                            fields=tuple(FIELDS[k] for k in ("instance_id_v1", "hostname", "public_keys", "region",
                                                             "interfaces", "user_data"))),
        "user_data": Request("/v1/user-data", sends=ASKED_BY),
    },
)
