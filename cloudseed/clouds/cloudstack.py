"""Apache CloudStack's virtual router as its guest reads it: the EC2-shaped ``/latest/meta-data/`` and
``/latest/user-data`` (version 1.0's layout, listed as ``latest``), and the password server on port
8080, asked with the ``DomU_Request`` header.

Read by ``agent/datasources/cloudstack.py``, served by ``provider/server/apis/cloudstack.py`` and
``password_server.py``. The metadata paths are EC2's family: the server tells them apart by the
instance's record.
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
    "cloudstack", datasource="CloudStack",
    addresses=("http://169.254.169.254",),
    versions=("latest",),
    fields=FIELDS,
    names={"password_header": "DomU_Request", "password_port": "8080", "send_password": "send_my_password",
           "saved_password": "saved_password"},
    requests={
        "meta_data": Request("/{version}/meta-data/", form="listing",
                             fields=tuple(FIELDS[k] for k in ("instance_id", "local_hostname", "public_keys",
                                                              "zone"))),
        "user_data": Request("/{version}/user-data"),
    },
)
