"""EC2's instance metadata service (IMDS) as its guest reads it: IMDSv2 session tokens, dated versions,
the ``meta-data/`` tree, user-data and the signed instance identity.

Read by ``agent/datasources/ec2.py`` (and the agent's event reporting, which borrows the token)
and served by ``provider/server/apis/ec2.py`` with the token handling in ``metadata_app.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

TOKEN = "X-aws-ec2-metadata-token"
TTL = "X-aws-ec2-metadata-token-ttl-seconds"
WITH_TOKEN = ((TOKEN, None),)

CLOUD = Cloud(
    "ec2", datasource="Ec2",
    addresses=("http://169.254.169.254", "http://[fd00:ec2::254]"),
    # dated versions the guest understands, newest first; "latest" when the service lists none of them
    versions=("2021-03-23", "2018-09-24", "2016-09-02", "2009-04-04"),
    names={"token": TOKEN, "ttl": TTL, "ttl_value": "21600", "latest": "latest"},
    requests={
        "token": Request("/latest/api/token", method="PUT", sends=((TTL, "21600"),), answers=((TTL, None),)),
        "versions": Request("/", sends=WITH_TOKEN, form="listing"),
        "meta_data": Request("/{version}/meta-data/", sends=WITH_TOKEN, form="listing",
                             fields=("instance-id", "local-hostname", "public-keys/", "placement/")),
        "user_data": Request("/{version}/user-data", sends=WITH_TOKEN),
        "identity": Request("/{version}/dynamic/instance-identity/document", sends=WITH_TOKEN, form="json",
                            fields=("region", "availabilityZone")),
        "signatures": Request("/{version}/dynamic/instance-identity/", sends=WITH_TOKEN, form="listing",
                              fields=("pkcs7", "signature", "rsa2048")),
    },
)
