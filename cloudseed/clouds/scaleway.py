"""Scaleway's instance metadata service as its guest reads it: ``/conf?format=json`` at 169.254.42.42,
and the user-data and vendor-data (``/user_data/cloud-init``, ``/vendor_data/cloud-init``), which
are answered only to a privileged source port (below 1024: root on the instance).

Read by ``agent/datasources/scaleway.py``, served by ``provider/server/apis/scaleway.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# the document's fields, by role (nested ones too: a key's, the location's, an address's): the guest
# reads them, the server writes them
FIELDS = {"instance_id": "id", "name": "name", "hostname": "hostname", "commercial_type": "commercial_type",
          "organization": "organization", "project": "project", "tags": "tags", "state_detail": "state_detail",
          "public_ip": "public_ip", "private_ip": "private_ip", "ipv6": "ipv6", "location": "location",
          "zone": "zone", "ssh_public_keys": "ssh_public_keys", "extra_volumes": "extra_volumes",
          "timezone": "timezone", "key": "key", "fingerprint": "fingerprint", "ip_id": "id", "address": "address",
          "gateway": "gateway", "netmask": "netmask", "dynamic": "dynamic", "family": "family",
          "zone_id": "zone_id", "platform_id": "platform_id", "cluster_id": "cluster_id",
          "hypervisor_id": "hypervisor_id", "node_id": "node_id"}

CLOUD = Cloud(
    "scaleway", datasource="Scaleway",
    addresses=("http://169.254.42.42",),
    prefixes=("/conf", "/user_data", "/vendor_data"),
    # a tag ``AUTHORIZED_KEY=<key with _ for spaces>`` is an SSH key too
    names={"privileged_below": "1024", "key_tag": "AUTHORIZED_KEY="},
    fields=FIELDS,
    requests={
        "conf": Request("/conf", query="format=json", form="json",
                        fields=(*(FIELDS[k] for k in ("instance_id", "hostname", "tags", "ssh_public_keys")),
                                f"{FIELDS['location']}.{FIELDS['zone_id']}")),
        "user_data": Request("/user_data/cloud-init", privileged_port=True),
        "vendor_data": Request("/vendor_data/cloud-init", privileged_port=True),
    },
)
