"""EC2 instance metadata of one instance: the ``meta-data/`` tree per API version, the identity document.

Every category AWS documents for a running instance, each from the version that introduced it
(``SINCE``: ``instance-type`` 2007-08-29, ``block-device-mapping/`` 2007-12-15, ``placement/``
2008-02-01, ``network/`` and ``mac`` 2011-01-01, ``iam/`` 2012-01-12, ``services/domain``
2014-02-25, ``ipv6s`` 2016-09-02, ``events/`` and ``identity-credentials/`` 2018-08-17,
``instance-life-cycle`` and ``placement/region`` 2019-10-01, ``events/recommendations/rebalance``
2020-10-27, ``ipv6`` 2021-01-03, ``tags/`` 2021-03-23; ``tags/instance/KEY`` is the tag's value,
served unless the record's ``ec2.instance_metadata_tags`` is ``disabled``; ``mac`` is not in
2009-04-04 and older, as on EC2). ``spot/``, ``events/recommendations/`` and ``autoscaling/`` are
there only when the record sets them (the service adds the timeline's, ``server/apis/_ec2_events.py``).
``profile`` is ``default-hvm`` from 2009-04-04 (where a real listing shows it). The service walks
the tree and adds the live leaves (temporary credentials); a config drive writes the static tree
as ``ec2/<version>/meta-data.json``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import socket
from typing import Any, Callable, Optional, Protocol, Union

from cloudseed.clouds.ec2 import FIELDS as F
from cloudseed.provider.instance_data.network import interfaces, private_ipv4, public_ipv4
from cloudseed.provider.registry import InstanceRecord

EC2_VERSIONS = ("1.0", "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10", "2007-12-15", "2008-02-01",
                "2008-09-01", "2009-04-04", "2011-01-01", "2011-05-01", "2012-01-12", "2014-02-25",
                "2014-11-05", "2015-10-20", "2016-04-19", "2016-06-30", "2016-09-02", "2018-03-28",
                "2018-08-17", "2018-09-24", "2019-10-01", "2020-10-27", "2021-01-03", "2021-03-23")
EC2_LATEST = EC2_VERSIONS[-1]
CONFIGDRIVE_EC2_VERSIONS = ("2009-04-04",)  # besides "latest"
DEFAULT_ACCOUNT = "123456789012"

# category -> first API version (of EC2_VERSIONS) that has it; absent: 1.0
SINCE = {
    F["local_hostname"]: "2007-01-19", F["public_hostname"]: "2007-01-19", F["public_ipv4"]: "2007-01-19",
    "product-codes": "2007-03-01", "instance-type": "2007-08-29", "block-device-mapping": "2007-12-15",
    F["placement"]: "2008-02-01", "instance-action": "2008-09-01", "mac": "2011-01-01", F["network"]: "2011-01-01",
    "iam": "2012-01-12", "services": "2014-02-25", "spot": "2014-11-05", F["ipv6s"]: "2016-09-02",
    "events": "2018-08-17", F["identity_credentials"]: "2018-08-17", "instance-life-cycle": "2019-10-01",
    "availability-zone-id": "2019-10-01", F["region"]: "2019-10-01", "group-name": "2020-10-27",
    "ipv6": "2021-01-03", "tags": "2021-03-23", "profile": "2009-04-04", "rebalance": "2020-10-27",
    "autoscaling": EC2_LATEST,
}

Leaf = Union[str, Callable[[], Any]]  # a text, or (service only) a function giving the live answer
Tree = dict[str, Union[Leaf, "Tree"]]


class LiveLeaves(Protocol):
    """The leaves only the service has (they change with time), for one instance."""

    def credentials(self, kind: str, name: str) -> Leaf:
        """``iam`` role ``name``'s or (``ec2-instance``) the instance's own temporary credentials."""

    def info(self, doc: dict) -> Leaf:
        """``doc`` with ``LastUpdated``: when the credentials it describes were last renewed."""


def has(version: str, category: str) -> bool:
    return SINCE.get(category, "1.0") <= version


def meta_data_tree(record: InstanceRecord, version: str, configured_region: str = "",
                   live: Optional[LiveLeaves] = None) -> Tree:
    """The ``meta-data/`` tree of EC2 API ``version``: leaves are the texts the service answers.

    ``live``, given by the service, makes the leaves that change with time (temporary
    credentials, ``LastUpdated`` of the ``info`` documents); without it (a config drive) the
    credentials are left out and the ``info`` documents have no ``LastUpdated``."""
    ec2 = record.ec2
    local = private_ipv4(record) or ""
    public = public_ipv4(record)
    groups = security_groups(record)
    tree: Tree = {
        "ami-id": record.ami_id, "ami-launch-index": str(record.launch_index),
        "ami-manifest-path": "(unknown)", F["hostname"]: record.hostname, F["instance_id"]: record.instance_id,
        F["local_ipv4"]: local, "reservation-id": f"r-{_digest('r', record.instance_id)}",
        "security-groups": "\n".join(groups),
    }
    if has(version, F["local_hostname"]):
        tree[F["local_hostname"]] = record.hostname
    if public and has(version, F["public_ipv4"]):
        tree[F["public_ipv4"]] = public
        tree[F["public_hostname"]] = record.hostname
    if record.ssh_keys:
        tree[F["public_keys"]] = {str(i): {F["openssh_key"]: k["data"]} for i, k in enumerate(record.ssh_keys)}
    if ec2.get("product_codes") and has(version, "product-codes"):
        tree["product-codes"] = "\n".join(ec2["product_codes"])
    if has(version, "instance-type"):
        tree["instance-type"] = record.instance_type
    if has(version, "block-device-mapping"):
        tree["block-device-mapping"] = {"ami": "/dev/vda", "root": "/dev/vda"}
    if has(version, "profile"):
        tree["profile"] = "default-hvm"
    if has(version, F["placement"]):
        tree[F["placement"]] = _placement(record, version, configured_region)
    if has(version, "instance-action"):
        tree["instance-action"] = str(ec2.get("instance_action", "none"))
    if has(version, "instance-life-cycle"):
        tree["instance-life-cycle"] = str(ec2.get("life_cycle", "on-demand"))
    if has(version, "services"):
        domain, partition = services(region(record, configured_region))
        tree["services"] = {"domain": domain}
        if version >= "2015-10-20":
            tree["services"]["partition"] = partition  # type: ignore[index]
    if ec2.get("spot") and has(version, "spot"):
        spot = ec2["spot"]
        tree["spot"] = {"termination-time": spot["time"]}
        if version >= "2018-03-28":
            tree["spot"]["instance-action"] = json.dumps({"action": spot["action"], "time": spot["time"]})  # type: ignore[index]
    if has(version, "events"):
        scheduled, history = maintenance_documents(ec2.get("events", []))
        tree["events"] = {"maintenance": {"scheduled": _indented(scheduled), "history": _indented(history)}}
        if ec2.get("rebalance") and has(version, "rebalance"):
            tree["events"]["recommendations"] = {  # type: ignore[index]
                "rebalance": json.dumps({"noticeTime": ec2["rebalance"]["notice_time"]})}
    if ec2.get("target_lifecycle_state") and has(version, "autoscaling"):
        tree["autoscaling"] = {"target-lifecycle-state": ec2["target_lifecycle_state"]}
    if ec2.get("iam_role") and has(version, "iam"):
        role = ec2["iam_role"]
        iam: Tree = {"info": _info(iam_info(record), live)}
        if live is not None:
            iam[F["credentials"]] = {role: live.credentials("iam", role)}
        tree["iam"] = iam
    if has(version, F["identity_credentials"]):
        ident: Tree = {"info": _info({"Code": "Success", "AccountId": account_id(record)}, live)}
        if live is not None:
            ident[F["credentials"]] = {"ec2-instance": live.credentials("ec2-instance", "ec2-instance")}
        tree[F["identity_credentials"]] = {"ec2": ident}
    nics = interfaces(record)
    if has(version, F["network"]) and nics:
        tree["mac"] = nics[0][0]
        macs: Tree = {}
        for index, (mac, addresses) in enumerate(nics):
            macs[mac] = _interface(record, version, index, mac, addresses, groups)
        tree[F["network"]] = {F["interfaces"]: {F["macs"]: macs}}
        v6 = [a["address"] for a in nics[0][1] if ":" in a["address"]]
        if v6 and has(version, "ipv6"):
            tree["ipv6"] = v6[0]
    if has(version, "tags") and record.tags and ec2.get("instance_metadata_tags", "enabled") == "enabled":
        tree["tags"] = {"instance": dict(record.tags)}  # tags/instance/KEY -> its value
    return tree


def _info(doc: dict, live: Optional[LiveLeaves]) -> Leaf:
    return live.info(doc) if live is not None else json.dumps(doc, indent=2)


def _placement(record: InstanceRecord, version: str, configured_region: str) -> Tree:
    ec2 = record.ec2
    placement: Tree = {F["zone"]: record.availability_zone}
    if has(version, "availability-zone-id"):
        placement["availability-zone-id"] = ec2.get("availability_zone_id") or zone_id(record, configured_region)
    if has(version, F["region"]):
        placement[F["region"]] = region(record, configured_region)
    if has(version, "group-name"):
        if ec2.get("placement_group"):
            placement["group-name"] = ec2["placement_group"]
            if ec2.get("partition_number"):
                placement["partition-number"] = str(ec2["partition_number"])
        if ec2.get("host_id"):
            placement["host-id"] = ec2["host_id"]
    return placement


def _indented(documents: list) -> str:
    """``json.dumps(documents, indent=2)``; an empty list (nearly every instance's) without the
    encoder, whose indenting form is pure Python and leaves a reference cycle per call."""
    return json.dumps(documents, indent=2) if documents else "[]"


def maintenance_documents(events: list) -> tuple[list[dict], list[dict]]:
    """``scheduled`` (active events) and ``history`` (completed or canceled) of the record's
    ``ec2.events``, as the documents AWS gives (the service adds the timeline's, ``server/apis/_ec2_events.py``)."""
    def shown(event: dict) -> dict:
        return maintenance_document(event["code"], event["description"], event["id"], event.get("not_before"),
                                    event.get("not_after"), event["state"])
    return ([shown(e) for e in events if e["state"] == "active"],
            [shown(e) for e in events if e["state"] != "active"])


def maintenance_document(code: str, description: str, event_id: str, not_before: Optional[str],
                         not_after: Optional[str], state: str) -> dict:
    doc = {"Code": code, "Description": description, "EventId": event_id, "NotAfter": _aws_time(not_after),
           "NotBefore": _aws_time(not_before), "State": state}
    return {k: v for k, v in doc.items() if v}


def _aws_time(stamp: Optional[str]) -> str:
    """2026-11-24T21:00:00Z as the events API words it: ``24 Nov 2026 21:00:00 GMT``."""
    if not stamp:
        return ""
    import datetime

    moment = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%d %b %Y %H:%M:%S GMT")


def _interface(record: InstanceRecord, version: str, index: int, mac: str, addresses: list[dict],
               groups: list[str]) -> Tree:
    private = [a for a in addresses if not a.get("public") and ":" not in a["address"]]
    v6 = [a for a in addresses if ":" in a["address"]]
    publics = [a["address"] for a in addresses if a.get("public")]
    first = (private or v6 or addresses or [None])[0]
    network = first["network"] if first else "default"  # the record's network name (its subnet's)
    nic: Tree = {F["device_number"]: str(index), "interface-id": f"eni-{mac.replace(':', '')}",
                 F["local_hostname"]: record.hostname, "mac": mac, "owner-id": account_id(record),
                 "security-groups": "\n".join(groups),
                 "security-group-ids": "\n".join(security_group_ids(record)),
                 "subnet-id": subnet_id(record, network), "vpc-id": vpc_id(record)}
    if private:
        nic[F["local_ipv4s"]] = "\n".join(a["address"] for a in private)
        nic[F["subnet_ipv4"]], vpc = ipv4_blocks(record, private[0])
        nic["vpc-ipv4-cidr-block"] = vpc
        if version >= "2016-06-30":
            nic["vpc-ipv4-cidr-blocks"] = vpc
    if v6 and has(version, F["ipv6s"]):
        nic[F["ipv6s"]] = "\n".join(a["address"] for a in v6)
        subnets6 = sorted({str(_subnet(a)) for a in v6})
        nic[F["subnet_ipv6"]] = "\n".join(subnets6)
        nic["vpc-ipv6-cidr-blocks"] = "\n".join(sorted({str(ipaddress.ip_network(s).supernet(new_prefix=56))
                                                         if ipaddress.ip_network(s).prefixlen > 56 else s
                                                         for s in subnets6}))
    if publics:
        nic["public-ipv4s"] = "\n".join(publics)
        nic[F["public_hostname"]] = record.hostname
        if private:
            nic["ipv4-associations"] = {p: private[0]["address"] for p in publics}
    return nic


def _subnet(entry: dict) -> ipaddress._BaseNetwork:
    default = 64 if ":" in entry["address"] else 24
    prefix = entry.get("prefix")
    return ipaddress.ip_interface(f"{entry['address']}/{prefix if prefix is not None else default}").network


def ipv4_blocks(record: InstanceRecord, entry: dict) -> tuple[str, str]:
    """(``subnet-ipv4-cidr-block``, ``vpc-ipv4-cidr-block``) of a NIC whose first private address
    is ``entry``: ``_subnet``'s and ``vpc_cidr``'s texts, worked out in integers for a plain
    dotted-quad address with a prefix of 0-32 (the server builds a tree per new instance, and
    ``ipaddress`` objects were most of its cost), by ``ipaddress`` for anything else."""
    address, prefix = entry["address"], entry.get("prefix")
    if prefix is None:
        prefix = 24
    if prefix.__class__ is int and 0 <= prefix <= 32 and not record.ec2.get("vpc_cidr") \
            and address.__class__ is str and address.count(".") == 3:
        try:
            packed = socket.inet_aton(address)
        except OSError:
            packed = b""
        if packed and socket.inet_ntoa(packed) == address:  # canonical: what ipaddress reads alike
            value = int.from_bytes(packed, "big")
            network = value & (0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF
            subnet = f"{socket.inet_ntoa(network.to_bytes(4, 'big'))}/{prefix}"
            if prefix <= 16:
                return subnet, subnet
            return subnet, f"{socket.inet_ntoa((value & 0xFFFF0000).to_bytes(4, 'big'))}/16"
    network_object = _subnet(entry)
    return str(network_object), vpc_cidr(record, network_object)


def vpc_cidr(record: InstanceRecord, subnet: ipaddress._BaseNetwork) -> str:
    """The record's ``ec2.vpc_cidr``, else the /16 holding ``subnet`` (the subnet when it is wider)."""
    if record.ec2.get("vpc_cidr"):
        return str(ipaddress.ip_network(record.ec2["vpc_cidr"], strict=False))
    return str(subnet.supernet(new_prefix=16) if subnet.prefixlen > 16 else subnet)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:17]


def account_id(record: InstanceRecord) -> str:
    """12 digits, always: ``ec2.account_id``; else the project id when it is 12 digits or fewer
    (zero-padded, as AWS writes account ids with leading zeros); else 12 digits derived from the
    project id (SHA-256, the same on every server); else ``123456789012``."""
    given = record.ec2.get("account_id")
    if given:
        return str(given)
    project = record.project_id
    if not project:
        return DEFAULT_ACCOUNT
    if project.isascii() and project.isdigit() and len(project) <= 12:
        return project.zfill(12)
    return str(int(hashlib.sha256(b"aws-account\0" + project.encode()).hexdigest(), 16) % 10**12).zfill(12)


def security_groups(record: InstanceRecord) -> list[str]:
    return list(record.ec2.get("security_groups") or ["default"])


def security_group_ids(record: InstanceRecord) -> list[str]:
    given = record.ec2.get("security_group_ids")
    if given:
        return list(given)
    return [f"sg-{_digest('sg', account_id(record), name)}" for name in security_groups(record)]


def vpc_id(record: InstanceRecord) -> str:
    return str(record.ec2.get("vpc_id") or f"vpc-{_digest('vpc', account_id(record))}")


def subnet_id(record: InstanceRecord, network: str) -> str:
    given = (record.ec2.get("subnet_ids") or {}).get(network)
    return str(given or f"subnet-{_digest('subnet', account_id(record), network)}")


def zone_id(record: InstanceRecord, configured_region: str) -> str:
    """``use1-az1``-like id of the zone: the region's initials and the zone letter's position."""
    zone = record.availability_zone
    parts = region(record, configured_region).split("-")
    short = "".join(p[:1] if not p.isdigit() else p for p in parts) or "az"
    letter = zone[-1] if zone and zone[-1].isalpha() else "a"
    return f"{short}-az{ord(letter.lower()) - ord('a') + 1}"


def services(region_name: str) -> tuple[str, str]:
    """(``services/domain``, ``services/partition``) of a region."""
    if region_name.startswith("cn-"):
        return "amazonaws.com.cn", "aws-cn"
    if region_name.startswith("us-gov-"):
        return "amazonaws.com", "aws-us-gov"
    return "amazonaws.com", "aws"


def iam_info(record: InstanceRecord) -> dict:
    role = record.ec2.get("iam_role", "")
    partition = services(region(record, ""))[1]
    return {"Code": "Success",
            "InstanceProfileArn": f"arn:{partition}:iam::{account_id(record)}:instance-profile/{role}",
            "InstanceProfileId": "AIPA" + _digest(account_id(record), role).upper()[:17]}


def identity_document(record: InstanceRecord, configured_region: str = "") -> str:
    """``dynamic/instance-identity/document``: the instance's identity as AWS words it."""
    ec2 = record.ec2
    return json.dumps({
        "accountId": account_id(record), "architecture": "x86_64",
        F["identity_zone"]: record.availability_zone, "billingProducts": None, "devpayProductCodes": None,
        "marketplaceProductCodes": list(ec2.get("product_codes") or []) or None,
        "imageId": record.ami_id, "instanceId": record.instance_id, "instanceType": record.instance_type,
        "kernelId": None, "pendingTime": record.created_at, "privateIp": private_ipv4(record),
        "ramdiskId": None, F["identity_region"]: region(record, configured_region), "version": "2017-09-30",
    }, indent=2)


def region(record: InstanceRecord, configured: str) -> str:
    """The configured region, else the availability zone without its trailing letter (us-east-1a)."""
    if configured:
        return configured
    zone = record.availability_zone
    if len(zone) > 1 and zone[-1].isalpha() and zone[-2].isdigit():
        return zone[:-1]
    return zone
