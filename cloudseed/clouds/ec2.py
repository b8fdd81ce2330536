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

# the ``meta-data/`` tree's names (a directory's or a leaf's, nested ones too: a public key's, the
# placement's, a NIC's under network/interfaces/macs/<mac>/) and the identity document's fields, by
# role: the guest's crawler and datasource read them, the server's tree writes them. The tree has
# more categories than these (instance-type, services/, events/...): the guest keeps them as crawled.
FIELDS = {"instance_id": "instance-id", "hostname": "hostname", "local_hostname": "local-hostname",
          "local_ipv4": "local-ipv4", "public_ipv4": "public-ipv4", "public_hostname": "public-hostname",
          "public_keys": "public-keys", "openssh_key": "openssh-key", "placement": "placement",
          "zone": "availability-zone", "region": "region", "credentials": "security-credentials",
          "identity_credentials": "identity-credentials",
          "network": "network", "interfaces": "interfaces", "macs": "macs", "device_number": "device-number",
          "local_ipv4s": "local-ipv4s", "ipv6s": "ipv6s", "subnet_ipv4": "subnet-ipv4-cidr-block",
          "subnet_ipv6": "subnet-ipv6-cidr-blocks",
          "identity_zone": "availabilityZone", "identity_region": "region",
          "pkcs7": "pkcs7", "signature": "signature", "rsa2048": "rsa2048"}

CLOUD = Cloud(
    "ec2", datasource="Ec2",
    addresses=("http://169.254.169.254", "http://[fd00:ec2::254]"),
    # dated versions the guest understands, newest first; "latest" when the service lists none of them
    versions=("2021-03-23", "2018-09-24", "2016-09-02", "2009-04-04"),
    names={"token": TOKEN, "ttl": TTL, "ttl_value": "21600", "latest": "latest"},
    fields=FIELDS,
    requests={
        "token": Request("/latest/api/token", method="PUT", sends=((TTL, "21600"),), answers=((TTL, None),)),
        "versions": Request("/", sends=WITH_TOKEN, form="listing"),
        "meta_data": Request("/{version}/meta-data/", sends=WITH_TOKEN, form="listing",
                             fields=(*(FIELDS[k] for k in ("instance_id", "local_hostname")),
                                     *(FIELDS[k] + "/" for k in ("public_keys", "placement")))),
        "user_data": Request("/{version}/user-data", sends=WITH_TOKEN),
        "identity": Request("/{version}/dynamic/instance-identity/document", sends=WITH_TOKEN, form="json",
                            fields=tuple(FIELDS[k] for k in ("identity_region", "identity_zone"))),
        "signatures": Request("/{version}/dynamic/instance-identity/", sends=WITH_TOKEN, form="listing",
                              fields=tuple(FIELDS[k] for k in ("pkcs7", "signature", "rsa2048"))),
    },
)
