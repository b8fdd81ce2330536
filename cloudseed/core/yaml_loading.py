"""Loading untrusted YAML (user-data, meta-data) safely, and describing YAML errors by line and column.

Uses libyaml's safe loader when PyYAML was built with it (a large cloud-config loads several
times faster), and accepts the ``!!python/unicode`` tag that old tools emit, as cloud-init does.
Aliases are bounded: a document whose aliases would expand to far more nodes than it holds (a
"billion laughs") is refused before it is built, so nothing later (merging, copying, JSON) can
blow up on it.
"""

from __future__ import annotations

import yaml

TYPE_CHECKING = False  # typing is not imported at boot
if TYPE_CHECKING:
    from typing import Any

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class UserDataLoader(_Base):  # type: ignore[misc, valid-type]
    """Safe YAML loader for user-data."""


UserDataLoader.add_constructor(
    "tag:yaml.org,2002:python/unicode", lambda loader, node: loader.construct_scalar(node))


# expanded nodes allowed: ten times the document's own nodes, plus this much (plain documents
# have no aliases, so they always pass)
ALIAS_EXPANSION_ALLOWANCE = 100_000


class AliasExpansionError(yaml.YAMLError):
    """The document's aliases expand to too many nodes."""


def load_yaml(text: str | bytes) -> Any:
    """Parse one YAML document (text, or bytes in UTF-8/16); raises ``yaml.YAMLError``
    (``AliasExpansionError`` for an alias bomb)."""
    if isinstance(text, str):
        _refuse_undecoded_bytes(text)
    loader = UserDataLoader(text)
    try:
        node = _bounded_node(loader)
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


class NotUtf8Error(yaml.YAMLError):
    """The document held bytes that are not UTF-8 (kept as surrogates when it was decoded)."""


def _refuse_undecoded_bytes(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        before = text[:e.start]
        line = before.count("\n") + 1
        column = e.start - (before.rfind("\n") + 1) + 1
        byte = ord(text[e.start]) - 0xDC00 if "\udc80" <= text[e.start] <= "\udcff" else None
        what = f"byte 0x{byte:02x}" if byte is not None else "a character that is no Unicode scalar"
        raise NotUtf8Error(f"line {line}, column {column}: {what} is not UTF-8 (YAML must be "
                           f"UTF-8; re-save the file as UTF-8)") from None


def compose_yaml(text: str | bytes) -> yaml.Node | None:
    """The node graph of one document (to find where keys are), alias bombs refused as by ``load_yaml``."""
    if isinstance(text, str):
        _refuse_undecoded_bytes(text)
    loader = UserDataLoader(text)
    try:
        return _bounded_node(loader)
    finally:
        loader.dispose()


def _bounded_node(loader: Any) -> yaml.Node | None:
    node = loader.get_single_node()
    if node is None:
        return None
    distinct, expanded = node_counts(node)
    allowed = 10 * distinct + ALIAS_EXPANSION_ALLOWANCE
    if expanded > allowed:
        raise AliasExpansionError(f"aliases expand the document's {distinct} nodes to more than {allowed} "
                                  "(an alias bomb?); not loaded")
    return node


def node_counts(root: yaml.Node, stop: int = 10**9) -> tuple[int, int]:
    """(distinct nodes, nodes once every alias is expanded), the second capped at ``stop``."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes and not children_done:
            continue
        children = _children(node)
        if children_done or not children:
            sizes[key] = min(stop, 1 + sum(sizes.get(id(child), 1) for child in children))
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return len(sizes), sizes[id(root)]


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def describe_yaml_error(error: yaml.YAMLError) -> str:
    """``line 3, column 5: mapping values are not allowed here`` (1-based, as editors count)."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    text = f"{context}, {problem}" if context else str(problem)
    if mark is None:
        return text
    return f"line {mark.line + 1}, column {mark.column + 1}: {text}"
