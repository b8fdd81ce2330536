"""UpCloud's metadata API: ``/metadata/v1.json`` and the ``/metadata/v1/`` path tree.

Answered for instances whose record has ``clouds.upcloud`` (the path family is DigitalOcean's
otherwise, see ``routes.api_for``). The document is ``provider/instance_data/upcloud.py``; under
``/metadata/v1/`` a directory lists its entries one a line (``name/`` for directories, list
items as ``0/``), a leaf is its text (``true``/``false``; lists of names one a line). No header
is required. Answers are rendered once per instance and path (``MetadataApp._cached``).
"""

from __future__ import annotations

import json
from typing import Any, Optional

from cloudseed.provider.instance_data import upcloud
from cloudseed.provider.server.http import Response, text_error
from cloudseed.provider.server.vultr_api import tree_response

PREFIX = "/metadata/v1"


def handle(app: Any, request: Any, instance: Any) -> Any:
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    rest = request.path[len(PREFIX):]
    record = instance.record
    if rest == ".json":
        return app._cached(request, instance, "uc/.json", lambda: Response(
            200, json.dumps(upcloud.metadata(record)), "application/json"))
    if rest and not rest.startswith("/"):
        return text_error(404, "not found")
    parts = tuple(p for p in rest.split("/") if p)
    return app._cached(request, instance, "uc/" + "/".join(parts), lambda: render(record, parts))


def render(record: Any, parts: tuple) -> Optional[Response]:
    return tree_response(upcloud.metadata(record), parts)
