"""EC2 instance metadata of one instance: the ``meta-data/`` tree per API version, the identity document.

Keys appear only from the version AWS introduced them (``instance-type`` 2007-08-29,
``block-device-mapping/`` 2007-12-15, ``placement/`` 2008-02-01, ``dynamic/`` 2009-04-04,
``network/`` and ``mac`` 2011-01-01, ``ipv6s`` 2016-09-02, ``placement/region`` 2019-10-01,
``tags/`` 2021-03-23; ``tags/instance/KEY`` is the tag's value). The service walks the tree; a
config drive writes it as ``ec2/<version>/meta-data.json``.
"""

from __future__ import annotations

import json
from typing import Union

from cloudseed.provider.instance_data.network import interfaces, private_ipv4, public_ipv4
from cloudseed.provider.registry import InstanceRecord

EC2_VERSIONS = ("1.0", "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10", "2007-12-15", "2008-02-01",
                "2008-09-01", "2009-04-04", "2011-01-01", "2011-05-01", "2012-01-12", "2014-02-25",
                "2014-11-05", "2015-10-20", "2016-04-19", "2016-06-30", "2016-09-02", "2018-03-28",
                "2018-08-17", "2018-09-24", "2019-10-01", "2020-10-27", "2021-01-03", "2021-03-23")
EC2_LATEST = EC2_VERSIONS[-1]
CONFIGDRIVE_EC2_VERSIONS = ("2009-04-04",)  # besides "latest"

Tree = dict[str, Union[str, "Tree"]]


def meta_data_tree(record: InstanceRecord, version: str, configured_region: str = "") -> Tree:
    """The ``meta-data/`` tree of EC2 API ``version``: leaves are the texts the service answers."""
    local = private_ipv4(record) or ""
    public = public_ipv4(record)
    tree: Tree = {
        "ami-id": record.ami_id, "ami-launch-index": str(record.launch_index),
        "ami-manifest-path": "(unknown)", "hostname": record.hostname, "instance-id": record.instance_id,
        "local-hostname": record.hostname, "local-ipv4": local,
        "reservation-id": f"r-{record.instance_id}", "security-groups": "default",
    }
    if public:
        tree["public-ipv4"] = public
        tree["public-hostname"] = record.hostname
    if record.ssh_keys:
        tree["public-keys"] = {str(i): {"openssh-key": k["data"]} for i, k in enumerate(record.ssh_keys)}
    if version >= "2007-08-29":
        tree["instance-type"] = record.instance_type
    if version >= "2007-12-15":
        tree["block-device-mapping"] = {"ami": "vda", "root": "/dev/vda"}
    if version >= "2008-02-01":
        tree["placement"] = {"availability-zone": record.availability_zone}
        if version >= "2019-10-01":
            tree["placement"]["region"] = region(record, configured_region)  # type: ignore[index]
    nics = interfaces(record)
    if version >= "2011-01-01" and nics:
        tree["mac"] = nics[0][0]
        macs: Tree = {}
        for index, (mac, addresses) in enumerate(nics):
            private = [a["address"] for a in addresses if not a.get("public") and ":" not in a["address"]]
            nic: Tree = {"device-number": str(index), "interface-id": f"eni-{mac.replace(':', '')}",
                         "local-hostname": record.hostname, "mac": mac, "owner-id": record.project_id or "0"}
            if private:
                nic["local-ipv4s"] = "\n".join(private)
            v6 = [a["address"] for a in addresses if ":" in a["address"]]
            if v6 and version >= "2016-09-02":
                nic["ipv6s"] = "\n".join(v6)
            publics = [a["address"] for a in addresses if a.get("public")]
            if publics:
                nic["public-ipv4s"] = "\n".join(publics)
            macs[mac] = nic
        tree["network"] = {"interfaces": {"macs": macs}}
    if version >= "2021-03-23" and record.tags:
        tree["tags"] = {"instance": dict(record.tags)}  # tags/instance/KEY -> its value
    return tree


def identity_document(record: InstanceRecord, configured_region: str = "") -> str:
    """``dynamic/instance-identity/document``: the instance's identity as AWS words it."""
    return json.dumps({
        "accountId": record.project_id or "0", "architecture": "x86_64",
        "availabilityZone": record.availability_zone, "imageId": record.ami_id,
        "instanceId": record.instance_id, "instanceType": record.instance_type,
        "pendingTime": record.created_at, "privateIp": private_ipv4(record),
        "region": region(record, configured_region), "version": "2017-09-30",
    }, indent=2)


def region(record: InstanceRecord, configured: str) -> str:
    """The configured region, else the availability zone without its trailing letter (us-east-1a)."""
    if configured:
        return configured
    zone = record.availability_zone
    if len(zone) > 1 and zone[-1].isalpha() and zone[-2].isdigit():
        return zone[:-1]
    return zone
