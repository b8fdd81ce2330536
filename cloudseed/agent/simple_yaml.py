"""Small YAML documents read without PyYAML, for the boot's first stage.

A NoCloud ``meta-data`` is nearly always a few ``key: value`` lines and perhaps a list of public
keys. Importing PyYAML for that costs 1-2 s early in an emulated boot (cold page cache, its
regular expressions compiled at import), which is most of the local stage. ``load`` reads a strict
subset whose meaning is certain: block mappings of plain keys to scalars that YAML reads as
strings or nulls, and one level of nested block mappings or lists of them. For anything else it
returns ``None`` and the caller uses PyYAML, so the result is always what ``yaml.safe_load``
would give (a differential test in tests/agent checks this on generated documents).
"""

from __future__ import annotations

import re

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")
# a plain scalar YAML 1.1 reads as a string: starts with a letter, no indicator characters
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9 ._@+/=,-]*\Z")
_SINGLE_QUOTED = re.compile(r"'([^'\\]*)'\Z")
_DOUBLE_QUOTED = re.compile(r'"([^"\\]*)"\Z')
# plain words PyYAML resolves to booleans or null
_NOT_STRINGS = frozenset(
    word for base in ("yes", "no", "true", "false", "on", "off", "null") for word in (base, base.title(), base.upper())
)
_NOT_SIMPLE = object()


def _scalar(text: str) -> object:
    """The string (or None) a scalar means, or _NOT_SIMPLE when only PyYAML can say."""
    text = text.rstrip(" ")
    if text == "":
        return None
    if text[0] in "'\"":
        match = (_SINGLE_QUOTED if text[0] == "'" else _DOUBLE_QUOTED).match(text)
        return match.group(1) if match else _NOT_SIMPLE
    if _PLAIN.match(text) and text not in _NOT_STRINGS:
        return text
    return _NOT_SIMPLE


def _key(text: str) -> str | None:
    return text if _KEY.match(text) and text not in _NOT_STRINGS else None


def load(text: str) -> dict | None:
    """The mapping ``text`` holds when it is in the simple subset, else None (use PyYAML)."""
    if not text.isascii() or "\t" in text or "\r" in text or "\\" in text:
        return None
    lines = [(len(line) - len(line.lstrip(" ")), line.strip(" ")) for line in text.split("\n")]
    lines = [(indent, body) for indent, body in lines if body and not body.startswith("#")]
    if lines and lines[0] == (0, "---"):
        lines = lines[1:]
    if not lines:
        return None  # empty documents and comments only: PyYAML says None, callers decide
    result: dict = {}
    index = 0
    while index < len(lines):
        indent, body = lines[index]
        if indent != 0 or ":" not in body:
            return None
        raw_key, _sep, rest = body.partition(":")
        key = _key(raw_key)
        if key is None or (rest and not rest.startswith(" ")):
            return None
        index += 1
        if rest.strip(" "):
            value = _scalar(rest.strip(" "))
            if value is _NOT_SIMPLE:
                return None
            result[key] = value
            continue
        nested = []
        while index < len(lines) and (lines[index][0] > 0 or lines[index][1].startswith("- ")):
            nested.append(lines[index])
            index += 1
        value = _block(nested)
        if value is _NOT_SIMPLE:
            return None
        result[key] = value
    return result


def _block(lines: list[tuple[int, str]]) -> object:
    """A nested block: a list of scalars, a mapping of keys to scalars, or nothing (null)."""
    if not lines:
        return None
    indent = lines[0][0]
    if any(i != indent for i, _body in lines):
        return _NOT_SIMPLE
    if all(body.startswith("- ") for _i, body in lines):
        items = [_scalar(body[2:].strip(" ")) for _i, body in lines]
        if any(item is _NOT_SIMPLE or item is None for item in items):
            return _NOT_SIMPLE
        return items
    if indent == 0:
        return _NOT_SIMPLE
    mapping: dict = {}
    for _i, body in lines:
        raw_key, sep, rest = body.partition(":")
        key = _key(raw_key)
        if not sep or key is None or (rest and not rest.startswith(" ")):
            return _NOT_SIMPLE
        value = _scalar(rest.strip(" "))
        if value is _NOT_SIMPLE:
            return _NOT_SIMPLE
        mapping[key] = value
    return mapping
