"""NWCS's metadata API: ``/api/v1/metadata`` (the whole document, JSON) and ``/api/v1/metadata/KEY``.

The document is ``provider/instance_data/nwcs.py``. ``/api/v1/metadata/KEY`` (and deeper paths
into it) answer as a path tree: a scalar is its text (``instance-id`` is what cloud-init 22.4
asks while it waits for its DHCP lease), a list of names one a line, a directory its entries.
No header is required. Answers are rendered once per instance and path.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from cloudseed.clouds.nwcs import CLOUD
from cloudseed.provider.instance_data import nwcs
from cloudseed.provider.server.apis._json_tree import tree_response
from cloudseed.provider.server.engine.http import Response, text_error

PREFIX = CLOUD.base  # the wire contract: clouds/nwcs.py


def handle(app: Any, request: Any, instance: Any) -> Any:
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    rest = request.path[len(PREFIX):]
    if rest and not rest.startswith("/"):
        return text_error(404, "not found")
    parts = tuple(p for p in rest.split("/") if p)
    record = instance.record
    return app._cached(request, instance, "nwcs/" + "/".join(parts), lambda: render(record, parts))


def render(record: Any, parts: tuple) -> Optional[Response]:
    if parts == ():
        return Response(200, "metadata\n")
    if parts[0] != "metadata":
        return None
    doc = nwcs.metadata(record)
    if len(parts) == 1:
        return Response(200, json.dumps(doc), "application/json")
    if parts[1:] in ((CLOUD.fields["user_data"],), (CLOUD.fields["vendor_data"],)):  # text, not JSON
        value = doc[parts[1]]
        return Response(200, value or "", "text/plain")
    return tree_response(doc, parts[1:])
