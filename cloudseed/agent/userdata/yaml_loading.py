"""Loading user-data YAML safely and describing YAML errors by line and column.

Uses libyaml's safe loader when PyYAML was built with it (a large cloud-config loads several
times faster), and accepts the ``!!python/unicode`` tag that old tools emit, as cloud-init does.
"""

from __future__ import annotations

from typing import Any

import yaml

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class UserDataLoader(_Base):  # type: ignore[misc, valid-type]
    """Safe YAML loader for user-data."""


UserDataLoader.add_constructor(
    "tag:yaml.org,2002:python/unicode", lambda loader, node: loader.construct_scalar(node))


def load_yaml(text: str) -> Any:
    """Parse one YAML document; raises ``yaml.YAMLError``."""
    return yaml.load(text, Loader=UserDataLoader)  # noqa: S506 - a safe loader subclass


def describe_yaml_error(error: yaml.YAMLError) -> str:
    """``line 3, column 5: mapping values are not allowed here`` (1-based, as editors count)."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    text = f"{context}, {problem}" if context else str(problem)
    if mark is None:
        return text
    return f"line {mark.line + 1}, column {mark.column + 1}: {text}"
