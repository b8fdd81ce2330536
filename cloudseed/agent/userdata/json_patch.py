"""RFC 6902 JSON Patch, for ``#cloud-config-jsonp`` parts (a patch applied to the merged config).

Operations: add, remove, replace, move, copy, test; paths are RFC 6901 JSON pointers
(``~0`` is ``~``, ``~1`` is ``/``, ``-`` is the end of an array). A patch applies completely or
not at all: ``apply_patch`` works on a copy and raises ``JsonPatchError`` naming the failing
operation.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

_INDEX = re.compile(r"^(0|[1-9][0-9]*)$")


class JsonPatchError(ValueError):
    """A patch that is malformed or does not apply to the document."""


def parse_patch(text: str) -> list[dict]:
    """Parse and check the shape of a JSON patch document."""
    try:
        patch = json.loads(text)
    except ValueError as e:
        raise JsonPatchError(f"not valid JSON: {e}")
    if not isinstance(patch, list):
        raise JsonPatchError(f"a JSON patch is a list of operations, not a {type(patch).__name__}")
    for number, op in enumerate(patch, 1):
        if not isinstance(op, dict):
            raise JsonPatchError(f"operation {number} is not an object")
        if "op" not in op or "path" not in op:
            raise JsonPatchError(f"operation {number} needs 'op' and 'path'")
        if not isinstance(op["path"], str):
            raise JsonPatchError(f"operation {number}: 'path' must be a string")
        kind = op["op"]
        if kind not in ("add", "remove", "replace", "move", "copy", "test"):
            raise JsonPatchError(f"operation {number}: unknown op {kind!r}")
        if kind in ("add", "replace", "test") and "value" not in op:
            raise JsonPatchError(f"operation {number} ({kind}) needs a 'value'")
        if kind in ("move", "copy") and not isinstance(op.get("from"), str):
            raise JsonPatchError(f"operation {number} ({kind}) needs a 'from' pointer")
    return patch


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise JsonPatchError(f"pointer {pointer!r} must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _index(container: list, token: str, pointer: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not _INDEX.match(token):
        raise JsonPatchError(f"{token!r} in {pointer!r} is not an array index")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise JsonPatchError(f"index {index} in {pointer!r} is out of range")
    return index


def _resolve(doc: Any, tokens: list[str], pointer: str) -> Any:
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            if token not in node:
                raise JsonPatchError(f"{pointer!r}: no member {token!r}")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, pointer, allow_end=False)]
        else:
            raise JsonPatchError(f"{pointer!r}: cannot descend into a {type(node).__name__}")
    return node


def _add(doc: Any, pointer: str, value: Any) -> Any:
    tokens = _tokens(pointer)
    if not tokens:
        return value
    parent = _resolve(doc, tokens[:-1], pointer)
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, tokens[-1], pointer, allow_end=True), value)
    else:
        raise JsonPatchError(f"{pointer!r}: cannot add into a {type(parent).__name__}")
    return doc


def _remove(doc: Any, pointer: str) -> tuple[Any, Any]:
    tokens = _tokens(pointer)
    if not tokens:
        raise JsonPatchError("cannot remove the whole document")
    parent = _resolve(doc, tokens[:-1], pointer)
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise JsonPatchError(f"{pointer!r}: no member {tokens[-1]!r} to remove")
        return doc, parent.pop(tokens[-1])
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, tokens[-1], pointer, allow_end=False))
    raise JsonPatchError(f"{pointer!r}: cannot remove from a {type(parent).__name__}")


def apply_patch(doc: Any, patch: list[dict]) -> Any:
    """Return ``doc`` with ``patch`` applied (``doc`` itself is left untouched)."""
    doc = copy.deepcopy(doc)
    for number, op in enumerate(patch, 1):
        kind, path = op["op"], op["path"]
        try:
            if kind == "add":
                doc = _add(doc, path, copy.deepcopy(op["value"]))
            elif kind == "remove":
                doc, _ = _remove(doc, path)
            elif kind == "replace":
                tokens = _tokens(path)
                if not tokens:
                    doc = copy.deepcopy(op["value"])
                    continue
                _resolve(doc, tokens, path)  # must exist
                doc, _ = _remove(doc, path)
                doc = _add(doc, path, copy.deepcopy(op["value"]))
            elif kind == "move":
                source = op["from"]
                if path != source and path.startswith(source + "/"):
                    raise JsonPatchError(f"cannot move {source!r} into its own child {path!r}")
                doc, value = _remove(doc, source)
                doc = _add(doc, path, value)
            elif kind == "copy":
                value = copy.deepcopy(_resolve(doc, _tokens(op["from"]), op["from"]))
                doc = _add(doc, path, value)
            elif kind == "test":
                actual = _resolve(doc, _tokens(path), path)
                if actual != op["value"]:
                    raise JsonPatchError(f"test of {path!r} failed: {actual!r} != {op['value']!r}")
        except JsonPatchError as e:
            raise JsonPatchError(f"operation {number} ({kind} {path}): {e}")
    return doc
