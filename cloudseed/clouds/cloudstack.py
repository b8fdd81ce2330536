"""Apache CloudStack's virtual router as its guest reads it: the EC2-shaped ``/latest/meta-data/`` and
``/latest/user-data`` (version 1.0's layout, listed as ``latest``), and the password server on port
8080, asked with the ``DomU_Request`` header.

Read by ``agent/datasources/cloudstack.py``, served by ``provider/server/apis/cloudstack.py`` and
``password_server.py``. The metadata paths are EC2's family: the server tells them apart by the
instance's record.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "cloudstack", datasource="CloudStack",
    addresses=("http://169.254.169.254",),
    versions=("latest",),
    names={"password_header": "DomU_Request", "password_port": "8080", "send_password": "send_my_password",
           "saved_password": "saved_password"},
    requests={
        "meta_data": Request("/{version}/meta-data/", form="listing",
                             fields=("instance-id", "local-hostname", "public-keys", "availability-zone")),
        "user_data": Request("/{version}/user-data"),
    },
)
