"""The OpenStack metadata API (``/openstack/...``), as nova-api-metadata serves it.

Which version has which file and key is ``provider/instance_data/versions.py`` and the documents
are ``provider/instance_data`` (shared with config drives); this module answers HTTP. Each file
appears only from the version that introduced it; ``meta_data.json`` gets a fresh 512-byte
``random_seed`` on every request (from 2013-04-04).
"""

from __future__ import annotations

import json
from base64 import b64encode
from os import urandom
from typing import Callable, Optional, Union

from cloudseed.clouds.openstack import FIELDS as F
from cloudseed.provider.instance_data import openstack
from cloudseed.provider.instance_data.network import network_data
from cloudseed.provider.instance_data.versions import (
    GRIZZLY,
    OPENSTACK_FILES,
    OPENSTACK_VERSIONS,
    has_key,
    resolve_openstack,
)
from cloudseed.provider.registry import InstanceRecord
from cloudseed.provider.server.engine.http import Response

__all__ = ["GRIZZLY", "render", "resolve_version", "versions_listing"]

JSON = "application/json"
SEED_TEXT_LENGTH = 684  # len(base64 of 512 bytes)

Rendered = Union[Response, Callable[[], Response]]
resolve_version = resolve_openstack


def versions_listing() -> Response:
    return Response(200, "\n".join((*OPENSTACK_VERSIONS, "latest")))


def render(record: InstanceRecord, version: str, name: str) -> Optional[Rendered]:
    """The file ``name`` of API ``version`` for ``record``; None when it does not exist (404)."""
    resolved = resolve_openstack(version)
    if resolved is None:
        return None
    if name == "":
        names = [n for n, since in OPENSTACK_FILES.items() if since <= resolved
                 and not (n == "user_data" and record.user_data is None)]
        return Response(200, "\n".join(names))
    since = OPENSTACK_FILES.get(name)
    if since is None or since > resolved:
        return None
    if name == "meta_data.json":
        return _meta_data(record, resolved)
    if name == "user_data":
        if record.user_data is None:
            return None
        return Response.shared(record.user_data, "application/octet-stream")
    if name == "vendor_data.json":
        return _json(openstack.vendor_data_json(record.vendor_data))
    if name == "vendor_data2.json":
        return _json(openstack.vendor_data_json(record.vendor_data2))
    if name == "network_data.json":
        return _json(network_data(record))
    return None  # password is served by the application (it changes)


def _json(value: object) -> Response:
    return Response.shared(json.dumps(value), JSON)  # vendor data is often the same for many instances


def _meta_data(record: InstanceRecord, version: str) -> Rendered:
    doc = openstack.meta_data(record, version)
    if not has_key(version, F["random_seed"]):
        return _json(doc)
    # every request gets a fresh seed: serialise once around a placeholder
    marker = "@@RANDOM_SEED@@"
    doc[F["random_seed"]] = marker
    prefix, suffix = json.dumps(doc).encode().split(marker.encode())
    head = Response(200, prefix + bytes(SEED_TEXT_LENGTH) + suffix, JSON).keep_alive_head()  # same length

    def fresh() -> Response:
        return Response.prebuilt(200, prefix + b64encode(urandom(512)) + suffix, JSON, head)

    return fresh
