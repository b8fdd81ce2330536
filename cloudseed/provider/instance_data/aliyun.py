"""An instance as Alibaba Cloud ECS's metadata service describes it (``/2016-01-01/meta-data/``).

The tree Alibaba documents for a VPC instance: ``hostname``, ``instance-id``, ``image-id``,
``region-id``, ``zone-id``, ``instance/instance-type``, ``mac``, ``private-ipv4``,
``public-ipv4`` and ``eipv4`` (when the record has a public address), ``public-keys/0/openssh-key``...,
``network/interfaces/macs/<mac>/`` (``primary-ip-address``, ``private-ipv4s`` as a JSON list,
``netmask``, ``gateway``, ``vswitch-id``, ``vpc-id``...), ``dns-conf/nameservers``,
``ntp-conf/ntp-servers``. Settings come from ``record.clouds["aliyun"]`` (``region_id``,
``image_id``, ``vpc_id``, ``owner_account_id``); the rest is derived from the record.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from typing import Any

from cloudseed.clouds.aliyun import FIELDS as F
from cloudseed.provider.instance_data.network import interfaces, private_ipv4, public_ipv4
from cloudseed.provider.registry import InstanceRecord

NAMESERVERS = "100.100.2.136\n100.100.2.138"
NTP_SERVERS = "ntp1.aliyun.com\nntp1.cloud.aliyuncs.com\nntp2.cloud.aliyuncs.com"


def _id(prefix: str, *parts: str) -> str:
    return prefix + hashlib.sha256(":".join(parts).encode()).hexdigest()[:20]


def region(record: InstanceRecord) -> str:
    configured = (record.clouds.get("aliyun") or {}).get("region_id")
    if configured:
        return str(configured)
    zone = record.availability_zone
    return zone[:-2] if len(zone) > 2 and zone[-2] == "-" else zone  # cn-hangzhou-h -> cn-hangzhou


def meta_data(record: InstanceRecord) -> dict[str, Any]:
    """The ``meta-data/`` tree: dicts are directories, strings leaves."""
    settings = record.clouds.get("aliyun") or {}
    vpc = str(settings.get("vpc_id") or _id("vpc-", record.project_id or "default"))
    macs: dict[str, Any] = {}
    for mac, addresses in interfaces(record):
        v4 = [a for a in addresses if ":" not in a["address"]]
        if not v4:
            continue
        net = ipaddress.ip_interface(f"{v4[0]['address']}/{v4[0].get('prefix', 24)}").network
        vswitch = _id("vsw-", vpc, v4[0]["network"])
        macs[mac.lower()] = {
            "network-interface-id": _id("eni-", record.instance_id, mac),
            "primary-ip-address": v4[0]["address"],
            "private-ipv4s": json.dumps([a["address"] for a in v4]),
            "netmask": str(net.netmask),
            "gateway": str(net.network_address + 253),
            "vswitch-cidr-block": str(net), "vpc-cidr-block": str(net.supernet(new_prefix=max(8, net.prefixlen - 8))),
            "vswitch-id": vswitch, "vpc-id": vpc,
        }
    first = next(iter(macs), "")
    tree: dict[str, Any] = {
        "dns-conf": {"nameservers": NAMESERVERS},
        F["hostname"]: record.hostname,
        "image-id": str(settings.get("image_id") or record.ami_id),
        "instance": {"instance-type": record.instance_type, "instance-name": record.name},
        F["instance_id"]: record.instance_id,
        "network-type": "vpc",
        "ntp-conf": {"ntp-servers": NTP_SERVERS},
        "owner-account-id": str(settings.get("owner_account_id") or int(_id("", record.project_id)[:12], 16)),
        "private-ipv4": private_ipv4(record) or "",
        F["region"]: region(record),
        "serial-number": str(record.instance_id),
        "source-address": "http://mirrors.cloud.aliyuncs.com",
        "vpc-id": vpc,
        F["zone"]: record.availability_zone,
    }
    if first:
        tree["mac"] = first
        tree[F["network"]] = {F["interfaces"]: {F["macs"]: macs}}
        tree["vswitch-id"] = macs[first]["vswitch-id"]
        tree["vswitch-cidr-block"] = macs[first]["vswitch-cidr-block"]
    public = public_ipv4(record)
    if public:
        tree["public-ipv4"] = public
        tree["eipv4"] = public
    if record.ssh_keys:
        tree[F["public_keys"]] = {str(i): {F["openssh_key"]: k["data"]} for i, k in enumerate(record.ssh_keys)}
    return tree
