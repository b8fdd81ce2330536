"""The OVF environment as its guest reads it: an XML document (``ovf-env.xml``, namespace
``http://schemas.dmtf.org/ovf/environment/1``) on an ISO 9660 transport labelled ``OVF ENV`` (or
``OVFENV``, ``OVF-TRANSPORT``), in a seed directory, or in VMware's ``guestinfo.ovfEnv``; its
``PropertySection`` properties (``oe:key``, ``oe:value``) are the fields. No server or seed builder
of ours writes it yet.

Read by ``agent/datasources/ovf.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

LABELS = ("OVF ENV", "OVFENV", "OVF-TRANSPORT")
ENV_NAMES = ("ovf-env.xml", "ovf_env.xml", "OVF_ENV.XML", "OVF-ENV.XML")  # the environment file, any of

# the properties the guest reads, by role (``hostname`` is an older name of ``local-hostname``;
# ``user-data`` and ``network-config`` base64)
FIELDS = {"instance_id": "instance-id", "local_hostname": "local-hostname", "hostname": "hostname",
          "public_keys": "public-keys", "seedfrom": "seedfrom", "password": "password",
          "network_config": "network-config", "user_data": "user-data"}

CLOUD = Cloud(
    "ovf", datasource="OVF", served=False,
    addresses=LABELS,  # filesystem labels of the transport (ISO 9660)
    names={"namespace": "http://schemas.dmtf.org/ovf/environment/1", "section": "PropertySection",
           "property": "Property", "key": "key", "value": "value", "guestinfo": "ovfEnv"},
    fields=FIELDS,
    requests={"environment": Request(ENV_NAMES[0], form="xml")},
)
