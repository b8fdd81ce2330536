"""Vultr's metadata API: ``/v1.json`` (the whole document) and the ``/v1/`` path tree.

The document is ``provider/instance_data/vultr.py``. ``/v1.json`` is it as JSON; under ``/v1/`` a
directory lists its entries one a line (``name/`` for directories, list items as ``0/``), a leaf
is its text (lists of names one a line: ``public-keys``, ``tags``). No header is required (the
``Metadata-Token`` cloud-init sends is accepted and not checked, as Vultr's). Answers are
rendered once per instance and path (``MetadataApp._cached``).
"""

from __future__ import annotations

import json
from typing import Any, Optional

from cloudseed.provider.instance_data import vultr
from cloudseed.provider.server.http import Response, text_error

PREFIX = "/v1"


def handle(app: Any, request: Any, instance: Any) -> Any:
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    rest = request.path[len(PREFIX):]
    record = instance.record
    if rest == ".json":
        return app._cached(request, instance, "vultr/.json", lambda: Response(
            200, json.dumps(vultr.metadata(record)), "application/json"))
    if rest and not rest.startswith("/"):
        return text_error(404, "not found")
    parts = tuple(p for p in rest.split("/") if p)
    return app._cached(request, instance, "vultr/" + "/".join(parts), lambda: render(record, parts))


def render(record: Any, parts: tuple) -> Optional[Response]:
    return tree_response(vultr.metadata(record), parts)


def tree_response(doc: Any, parts: tuple) -> Optional[Response]:
    """The answer for ``parts`` of a JSON document as a path tree (None: not there). Also used by
    UpCloud's and NWCS's APIs."""
    node = doc
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node) and _is_dir(node):
            node = node[int(part)]
        else:
            return None
    if isinstance(node, dict) or (isinstance(node, list) and _is_dir(node)):
        entries = node.items() if isinstance(node, dict) else enumerate(node)
        return Response(200, "".join(f"{k}/\n" if _is_dir(v) else f"{k}\n" for k, v in entries))
    if isinstance(node, list):
        return Response(200, "".join(f"{item}\n" for item in node))
    if isinstance(node, bool):
        return Response(200, "true" if node else "false")
    return Response(200, str(node))


def _is_dir(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value))
