"""The EC2 instance metadata API: ``/<version>/meta-data/...`` trees, user-data, identity document.

Directory paths list their entries one per line (sub-directories end in ``/``); ``public-keys/``
lists ``0=name`` and ``0/openssh-key`` holds the key, as cloud-init's crawler expects. Keys appear
only from the version AWS introduced them (``instance-type`` 2007-08-29, ``placement/`` 2008-02-01,
``dynamic/`` 2009-04-04, ``network/`` and ``mac`` 2011-01-01, ``tags/`` 2021-03-23).
"""

from __future__ import annotations

import json
from typing import Optional, Union

from cloudseed.provider.registry import InstanceRecord
from cloudseed.provider.server.http import Response
from cloudseed.provider.server.instance_view import interfaces, private_ipv4, public_ipv4, region

VERSIONS = ("1.0", "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10", "2007-12-15", "2008-02-01",
            "2008-09-01", "2009-04-04", "2011-01-01", "2011-05-01", "2012-01-12", "2014-02-25", "2014-11-05",
            "2015-10-20", "2016-04-19", "2016-06-30", "2016-09-02", "2018-03-28", "2018-08-17", "2018-09-24",
            "2019-10-01", "2020-10-27", "2021-01-03", "2021-03-23")
LATEST = VERSIONS[-1]

Tree = dict[str, Union[str, "Tree"]]


def versions_listing() -> Response:
    return Response(200, "\n".join((*VERSIONS, "latest")))


def resolve_version(version: str) -> Optional[str]:
    if version == "latest":
        return LATEST
    return version if version in VERSIONS else None


def render(record: InstanceRecord, version: str, subpath: str, configured_region: str = "",
           trees: Optional[dict] = None) -> Optional[Response]:
    """``/<version>/<subpath>`` for ``record``; None when there is no such path (404).

    ``trees``, when given, keeps the meta-data tree built for each version (a crawl asks for
    every leaf of one tree; the record must be the same for every call with the same dict)."""
    resolved = resolve_version(version)
    if resolved is None:
        return None
    parts = [p for p in subpath.split("/") if p]
    if not parts:
        entries = ["dynamic", "meta-data"] if resolved >= "2009-04-04" else ["meta-data"]
        if record.user_data is not None:
            entries.append("user-data")
        return Response(200, "\n".join(entries))
    if parts == ["user-data"]:
        if record.user_data is None:
            return None
        return Response(200, record.user_data, "application/octet-stream")
    if parts[0] == "meta-data":
        key = ("meta-data tree", resolved)
        tree: Union[str, Tree, None] = trees.get(key) if trees is not None else None
        if tree is None:
            tree = meta_data_tree(record, resolved, configured_region)
            if trees is not None:
                trees[key] = tree
    elif parts[0] == "dynamic" and resolved >= "2009-04-04":
        tree = {"instance-identity": {"document": _identity(record, configured_region)}}
    else:
        return None
    for part in parts[1:]:
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    if isinstance(tree, str):
        return Response(200, tree)
    if parts[1:] == ["public-keys"]:
        return Response(200, "\n".join(f"{i}={k['name']}" for i, k in enumerate(record.ssh_keys)))
    return Response(200, "\n".join(f"{k}/" if isinstance(v, dict) else k for k, v in tree.items()))


def meta_data_tree(record: InstanceRecord, version: str, configured_region: str = "") -> Tree:
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
        tree["tags"] = {"instance": {tag: "" for tag in record.tags}}
    return tree


def _identity(record: InstanceRecord, configured_region: str) -> str:
    return json.dumps({
        "accountId": record.project_id or "0", "architecture": "x86_64",
        "availabilityZone": record.availability_zone, "imageId": record.ami_id,
        "instanceId": record.instance_id, "instanceType": record.instance_type,
        "pendingTime": record.created_at, "privateIp": private_ipv4(record),
        "region": region(record, configured_region), "version": "2017-09-30",
    }, indent=2)
