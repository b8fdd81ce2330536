"""A JSON metadata document served two ways, as Vultr's, UpCloud's, DigitalOcean's (and NWCS's) APIs do.

``<prefix>.json`` is the whole document as JSON; under ``<prefix>/`` a directory lists its
entries one a line (``name/`` for directories, list items as ``0/``), a leaf is its text
(``true``/``false``; lists of names one a line). Answers are rendered once per instance and path
(``MetadataApp._cached``).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from cloudseed.provider.server.engine.http import Response, text_error


def handle(app: Any, request: Any, instance: Any, prefix: str, cache_key: str,
           document: Callable[[Any], Any], tree: Optional[Callable[[Any], Any]] = None) -> Any:
    """Answer ``request`` (its path under ``prefix``) from ``document(record)``; the path tree is
    ``tree(document)`` when given (a document whose tree differs from its JSON)."""
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    rest = request.path[len(prefix):]
    record = instance.record
    if rest == ".json":
        return app._cached(request, instance, f"{cache_key}/.json", lambda: Response(
            200, json.dumps(document(record)), "application/json"))
    if rest and not rest.startswith("/"):
        return text_error(404, "not found")
    parts = tuple(p for p in rest.split("/") if p)

    def render() -> Optional[Response]:
        doc = document(record)
        return tree_response(tree(doc) if tree else doc, parts)

    return app._cached(request, instance, f"{cache_key}/" + "/".join(parts), render)


def tree_response(doc: Any, parts: tuple) -> Optional[Response]:
    """The answer for ``parts`` of a JSON document as a path tree (None: not there)."""
    node = doc
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and list_index(part, len(node)) and _is_dir(node):
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


def list_index(part: str, length: int) -> bool:
    """Whether ``part`` is an index of a list of ``length`` (ASCII digits, a few of them: ``int``
    of thousands of digits, or of a non-ASCII digit, would raise)."""
    return part.isascii() and part.isdigit() and len(part) <= 9 and int(part) < length
