"""CloudCIX's metadata API: ``/v1/metadata`` (JSON) and ``/v1/userdata``.

Chosen for ``/v1...`` when the record has ``clouds.cloudcix`` (``routes.api_for``). The document
is ``provider/instance_data/cloudcix.py``; ``/v1/userdata`` is the raw user-data (empty when there
is none); ``/v1`` lists both. No header is required. Answers are rendered once per instance and
path.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from cloudseed.clouds.cloudcix import CLOUD
from cloudseed.provider.instance_data import cloudcix
from cloudseed.provider.server.engine.http import Response, text_error

PREFIX = CLOUD.base  # the wire contract: clouds/cloudcix.py


def handle(app: Any, request: Any, instance: Any) -> Any:
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    path = request.path.rstrip("/")
    if path != PREFIX and not path.startswith(PREFIX + "/"):
        return text_error(404, "not found")
    record = instance.record
    leaf = path[len(PREFIX) + 1:] if path != PREFIX else ""
    return app._cached(request, instance, "cix/" + leaf, lambda: render(record, leaf))


def render(record: Any, leaf: str) -> Optional[Response]:
    if leaf == "":
        return Response(200, "metadata\nuserdata\n")
    if leaf == "metadata":
        return Response(200, json.dumps(cloudcix.metadata(record)), "application/json")
    if leaf == "userdata":
        return Response(200, record.user_data or b"", "text/plain")
    return None
