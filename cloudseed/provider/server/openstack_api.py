"""The OpenStack metadata API (``/openstack/...``), as nova-api-metadata serves it.

Each file appears only from the version that introduced it: ``password`` (2013-04-04),
``vendor_data.json`` (2013-10-17), ``network_data.json`` (2015-10-15), ``vendor_data2.json``
(2016-10-06). ``meta_data.json`` gains ``random_seed`` (fresh 512 bytes on every request) from
2013-04-04, ``project_id`` from 2015-10-15 and ``devices`` from 2016-06-30.
"""

from __future__ import annotations

import json
from base64 import b64encode
from os import urandom
from typing import Callable, Optional, Union

from cloudseed.provider.registry import InstanceRecord
from cloudseed.provider.server.http import Response
from cloudseed.provider.server.instance_view import network_data

FOLSOM, GRIZZLY, HAVANA, LIBERTY = "2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15"
NEWTON_ONE, NEWTON_TWO, OCATA, ROCKY, VICTORIA = "2016-06-30", "2016-10-06", "2017-02-22", "2018-08-27", \
    "2020-10-14"
VERSIONS = (FOLSOM, GRIZZLY, HAVANA, LIBERTY, NEWTON_ONE, NEWTON_TWO, OCATA, ROCKY, VICTORIA)
LATEST = VERSIONS[-1]
FILES = {"meta_data.json": FOLSOM, "user_data": FOLSOM, "password": GRIZZLY, "vendor_data.json": HAVANA,
         "network_data.json": LIBERTY, "vendor_data2.json": NEWTON_TWO}
JSON = "application/json"
SEED_TEXT_LENGTH = 684  # len(base64 of 512 bytes)

Rendered = Union[Response, Callable[[], Response]]


def versions_listing() -> Response:
    return Response(200, "\n".join((*VERSIONS, "latest")))


def resolve_version(version: str) -> Optional[str]:
    if version == "latest":
        return LATEST
    return version if version in VERSIONS else None


def render(record: InstanceRecord, version: str, name: str) -> Optional[Rendered]:
    """The file ``name`` of API ``version`` for ``record``; None when it does not exist (404)."""
    resolved = resolve_version(version)
    if resolved is None:
        return None
    if name == "":
        names = [n for n, since in FILES.items() if since <= resolved
                 and not (n == "user_data" and record.user_data is None)]
        return Response(200, "\n".join(names))
    since = FILES.get(name)
    if since is None or since > resolved:
        return None
    if name == "meta_data.json":
        return _meta_data(record, resolved)
    if name == "user_data":
        if record.user_data is None:
            return None
        return Response(200, record.user_data, "application/octet-stream")
    if name == "vendor_data.json":
        return _json(record.vendor_data if record.vendor_data is not None else {})
    if name == "vendor_data2.json":
        return _json(record.vendor_data2 if record.vendor_data2 is not None else {})
    if name == "network_data.json":
        return _json(network_data(record))
    return None  # password is served by the application (it changes)


def _json(value: object) -> Response:
    return Response(200, json.dumps(value), JSON)


def _meta_data(record: InstanceRecord, version: str) -> Rendered:
    doc: dict = {
        "uuid": record.instance_id, "name": record.name, "hostname": record.hostname,
        "launch_index": record.launch_index, "availability_zone": record.availability_zone,
        "meta": record.meta, "public_keys": {k["name"]: k["data"] for k in record.ssh_keys},
        "keys": [dict(k) for k in record.ssh_keys], "files": [],
    }
    if version >= LIBERTY:
        doc["project_id"] = record.project_id
    if version >= NEWTON_ONE:
        doc["devices"] = []
    if version < GRIZZLY:
        return _json(doc)
    # every request gets a fresh seed: serialise once around a placeholder
    marker = "@@RANDOM_SEED@@"
    doc["random_seed"] = marker
    prefix, suffix = json.dumps(doc).encode().split(marker.encode())
    head = Response(200, prefix + bytes(SEED_TEXT_LENGTH) + suffix, JSON).keep_alive_head()  # same length

    def fresh() -> Response:
        return Response.prebuilt(200, prefix + b64encode(urandom(512)) + suffix, JSON, head)

    return fresh
