"""Alibaba Cloud ECS's metadata service as its guest reads it: EC2-shaped, at 100.100.100.200,
``/2016-01-01/meta-data/`` (crawled) and ``/2016-01-01/user-data``, no token.

Read by ``agent/datasources/aliyun.py`` (through the EC2 crawler), served by
``provider/server/apis/aliyun.py``. The paths are EC2's family: the server tells them apart by the
instance's record.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "aliyun", datasource="AliYun",
    addresses=("http://100.100.100.200",),
    versions=("2016-01-01",),
    requests={
        "meta_data": Request("/{version}/meta-data/", form="listing",
                             fields=("instance-id", "hostname", "public-keys/")),
        "user_data": Request("/{version}/user-data"),
    },
)
