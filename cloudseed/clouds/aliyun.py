"""Alibaba Cloud ECS's metadata service as its guest reads it: EC2-shaped, at 100.100.100.200,
``/2016-01-01/meta-data/`` (crawled) and ``/2016-01-01/user-data``, no token.

Read by ``agent/datasources/aliyun.py`` (through the EC2 crawler), served by
``provider/server/apis/aliyun.py``. The paths are EC2's family: the server tells them apart by the
instance's record.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# the ``meta-data/`` tree's names the guest reads (a public key's and the NICs' under
# network/interfaces/macs/ too), by role: the datasource reads them, the server's tree writes them
FIELDS = {"instance_id": "instance-id", "hostname": "hostname", "public_keys": "public-keys",
          "openssh_key": "openssh-key", "zone": "zone-id", "region": "region-id", "network": "network",
          "interfaces": "interfaces", "macs": "macs"}

CLOUD = Cloud(
    "aliyun", datasource="AliYun",
    addresses=("http://100.100.100.200",),
    versions=("2016-01-01",),
    fields=FIELDS,
    requests={
        "meta_data": Request("/{version}/meta-data/", form="listing",
                             fields=(FIELDS["instance_id"], FIELDS["hostname"], FIELDS["public_keys"] + "/")),
        "user_data": Request("/{version}/user-data"),
    },
)
