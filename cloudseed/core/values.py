"""Reading cloud-config values the way users write them: YAML 1.1 booleans, a scalar or a list."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any


def get_list(cfg: dict, key: str) -> list:
    """``cfg[key]`` as a list (a single string becomes a one-item list, None an empty list)."""
    value = cfg.get(key)
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def as_bool(value: Any, default: bool = False) -> bool:
    """cloud-config booleans: true/false and the strings YAML 1.1 users write for them."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "on", "1", "y")
    return bool(value)
