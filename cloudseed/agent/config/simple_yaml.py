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

# patterns, compiled on first use (re's cache): a meta-data of plain lines needs two of them, and
# this module is imported before READY=1 at every boot
_KEY = r"[A-Za-z_][A-Za-z0-9_.-]*\Z"
# a plain scalar YAML 1.1 reads as a string: starts with a letter, no indicator characters
_PLAIN = r"[A-Za-z][A-Za-z0-9 ._@+/=,-]*\Z"
_SINGLE_QUOTED = r"'([^'\\]*)'\Z"
_DOUBLE_QUOTED = r'"([^"\\]*)"\Z'
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
        match = re.match(_SINGLE_QUOTED if text[0] == "'" else _DOUBLE_QUOTED, text)
        return match.group(1) if match else _NOT_SIMPLE
    if re.match(_PLAIN, text) and text not in _NOT_STRINGS:
        return text
    return _NOT_SIMPLE


# a continuation line of a multi-line plain scalar (folded into the scalar with one space)
_CONTINUATION = r"[A-Za-z0-9@+/=._][A-Za-z0-9 ._@+/=,-]*\Z"


def _key(text: str) -> str | None:
    return text if re.match(_KEY, text) and text not in _NOT_STRINGS else None


class _Lines:
    """The document's non-blank, non-comment lines as (line number, indent, text), with a cursor."""

    def __init__(self, text: str):
        self.items = []
        for number, line in enumerate(text.split("\n")):
            body = line.strip(" ")
            if body and not body.startswith("#"):
                self.items.append((number, len(line) - len(line.lstrip(" ")), body))
        self.at = 0

    def peek(self) -> tuple[int, int, str] | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def scalar(self, text: str, owner_indent: int, number: int) -> object:
        """The scalar ``text`` (on line ``number``) with its continuation lines, if any, folded in."""
        value = _scalar(text)
        while True:
            following = self.peek()
            if following is None or following[1] <= owner_indent:
                return value
            if not (isinstance(value, str) and text[:1] not in "'\"" and following[0] == number + 1
                    and re.match(_CONTINUATION, following[2])):
                return _NOT_SIMPLE  # a continuation after a gap, of a quoted scalar, or not plain
            value = f"{value} {following[2].rstrip(' ')}"
            number = following[0]
            self.at += 1


def load(text: str) -> dict | None:
    """The mapping ``text`` holds when it is in the simple subset, else None (use PyYAML)."""
    if not text.isascii() or "\t" in text or "\r" in text or "\\" in text:
        return None
    lines = _Lines(text)
    if lines.peek() is not None and lines.peek()[1:] == (0, "---"):
        lines.at += 1
    if lines.peek() is None:
        return None  # empty documents and comments only: PyYAML says None, callers decide
    result: dict = {}
    while lines.peek() is not None:
        number, indent, body = lines.peek()
        lines.at += 1
        if indent != 0 or ":" not in body:
            return None
        raw_key, _sep, rest = body.partition(":")
        key = _key(raw_key)
        if key is None or (rest and not rest.startswith(" ")):
            return None
        if rest.strip(" "):
            value = lines.scalar(rest.strip(" "), 0, number)
        else:
            value = _block(lines)
        if value is _NOT_SIMPLE:
            return None
        result[key] = value
    return result


def _block(lines: _Lines) -> object:
    """The nested block after ``key:``: a list of scalars, a mapping of keys to scalars, or null."""
    first = lines.peek()
    if first is None or not (first[1] > 0 or first[2].startswith("- ")):
        return None
    indent = first[1]
    if first[2].startswith("- "):
        items = []
        while lines.peek() is not None and lines.peek()[1] == indent and lines.peek()[2].startswith("- "):
            number, _indent, body = lines.peek()
            lines.at += 1
            item = lines.scalar(body[2:].strip(" "), indent, number)
            if item is _NOT_SIMPLE or item is None:
                return _NOT_SIMPLE
            items.append(item)
        following = lines.peek()
        return items if following is None or following[1] == 0 and not following[2].startswith("-") \
            else _NOT_SIMPLE
    mapping: dict = {}
    while lines.peek() is not None and lines.peek()[1] > 0:
        number, line_indent, body = lines.peek()
        lines.at += 1
        raw_key, sep, rest = body.partition(":")
        key = _key(raw_key)
        if line_indent != indent or not sep or key is None or (rest and not rest.startswith(" ")):
            return _NOT_SIMPLE
        value = lines.scalar(rest.strip(" "), indent, number) if rest.strip(" ") else None
        if value is _NOT_SIMPLE:
            return _NOT_SIMPLE
        mapping[key] = value
    return mapping
