"""Exoscale's metadata service as its guest reads it: CloudStack's, at version ``1.0``:
``/1.0/meta-data/`` (crawled), ``/1.0/user-data``; the password server on port 8080 with
CloudStack's ``DomU_Request`` header (``clouds/cloudstack.py``).

Read by ``agent/datasources/exoscale.py``, served by ``provider/server/apis/exoscale.py``. The paths
are EC2's family: the server tells them apart by the instance's record.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# the flat ``meta-data/`` directory's names, by role (``openssh_key``: a key's leaf when
# ``public-keys/`` is a directory of ``0=name`` entries, as EC2's): the datasource reads them, the
# server's tree (``provider/instance_data/cloudstack.py``) writes them
FIELDS = {"instance_id": "instance-id", "local_hostname": "local-hostname", "local_ipv4": "local-ipv4",
          "public_hostname": "public-hostname", "public_ipv4": "public-ipv4", "public_keys": "public-keys",
          "openssh_key": "openssh-key", "zone": "availability-zone", "cloud_identifier": "cloud-identifier",
          "service_offering": "service-offering", "vm_id": "vm-id"}

CLOUD = Cloud(
    "exoscale", datasource="Exoscale",
    addresses=("http://169.254.169.254",),
    versions=("1.0",),
    fields=FIELDS,
    names={"password_port": "8080"},
    requests={
        "meta_data": Request("/{version}/meta-data/", form="listing",
                             fields=tuple(FIELDS[k] for k in ("instance_id", "local_hostname", "public_keys",
                                                              "zone"))),
        "user_data": Request("/{version}/user-data"),
    },
)
