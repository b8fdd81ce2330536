"""The EC2 instance metadata API: ``/<version>/meta-data/...`` trees, user-data, identity document.

Directory paths list their entries one per line (sub-directories end in ``/``); ``public-keys/``
lists ``0=name`` and ``0/openssh-key`` holds the key, as cloud-init's crawler expects. The tree
itself (which key from which version) is ``provider/instance_data/ec2.py``, shared with the
config drive's ``ec2/`` files.
"""

from __future__ import annotations

from typing import Optional, Union

from cloudseed.provider.instance_data.ec2 import EC2_LATEST as LATEST
from cloudseed.provider.instance_data.ec2 import EC2_VERSIONS as VERSIONS
from cloudseed.provider.instance_data.ec2 import Tree, identity_document, meta_data_tree
from cloudseed.provider.registry import InstanceRecord
from cloudseed.provider.server.http import Response

__all__ = ["LATEST", "VERSIONS", "meta_data_tree", "render", "resolve_version", "versions_listing"]


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
        tree = {"instance-identity": {"document": identity_document(record, configured_region)}}
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
