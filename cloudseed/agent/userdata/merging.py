"""Merging cloud-config dictionaries the way cloud-init's ``merge_how`` / ``Merge-Type`` say.

A merge specification is a list of ``(kind, options)`` with kind ``dict``, ``list`` or ``str``,
written as a string (``"dict(recurse_array,no_replace)+list(append)+str()"``) or as a list in
YAML. Merging dispatches on the type of the *existing* value: a dict is merged by the first
``dict`` entry, a list by the first ``list`` entry, a string by the first ``str`` entry; any
other existing value, or one with no matching entry, is kept.

- ``dict``: ``no_replace`` (default) keeps existing keys and merges nested dicts, ``replace``
  takes the new value; ``recurse_array``/``recurse_list`` and ``recurse_str`` merge those too
  under ``no_replace``; ``allow_delete`` removes a key given as null.
- ``list``: ``replace`` (default, position by position), ``append``, ``prepend``, ``no_replace``
  (keep the old list); ``recurse_dict``/``recurse_array``/``recurse_str`` merge items in place.
- ``str``: ``append`` concatenates, otherwise the new string wins.

Cloud-config parts use ``dict(replace)+list()+str()`` by default (a later part's top-level key
replaces an earlier one); merging whole configurations (vendor under user) uses
``list()+dict()+str()`` (existing keys are kept).
"""

from __future__ import annotations

import re
from typing import Any, Sequence, Tuple

MergeSpec = Sequence[Tuple[str, Any]]

PART_DEFAULT = "dict(replace)+list()+str()"
CONFIG_DEFAULT = "list()+dict()+str()"
KINDS = ("dict", "list", "str")

_ENTRY = re.compile(r"^([a-zA-Z_][A-Za-z0-9_]*)\((.*?)\)$")


class MergeSpecError(ValueError):
    """A merge specification that cannot be understood."""


def parse_merge_string(text: str) -> list[tuple[str, list[str]]]:
    """``"dict(replace)+list(append)"`` -> ``[("dict", ["replace"]), ("list", ["append"])]``."""
    spec = []
    for entry in text.split("+"):
        entry = entry.lower().strip().replace("-", "_")
        if not entry:
            continue
        match = _ENTRY.match(entry)
        if not match:
            raise MergeSpecError(f"merge type {entry!r} is not of the form name(option,...)")
        name, options = match.groups()
        spec.append((name, [o.strip().lower() for o in options.split(",") if o.strip()]))
    return spec


def pop_merge_spec(config: dict) -> list[tuple[str, Any]]:
    """Remove ``merge_how`` (or ``merge_type``) from ``config`` and return it parsed ([] if absent)."""
    raw = config.pop("merge_how", None)
    if raw is None:
        raw = config.pop("merge_type", None)
    if raw is None:
        return []
    if isinstance(raw, str):
        return parse_merge_string(raw)
    if not isinstance(raw, list):
        raise MergeSpecError(f"merge_how must be a string or a list, not {type(raw).__name__}")
    spec: list[tuple[str, Any]] = []
    for item in raw:
        if isinstance(item, dict):
            if "name" not in item or "settings" not in item:
                raise MergeSpecError(f"merge_how entry {item!r} needs both 'name' and 'settings'")
            name, options = str(item["name"]).replace("-", "_").strip(), item["settings"]
        elif isinstance(item, (list, tuple)) and item:
            name, options = item[0], list(item[1:])
        else:
            raise MergeSpecError(f"merge_how entry {item!r} must be [name, option, ...] or "
                                 "{name: ..., settings: [...]}")
        if name:
            spec.append((name, options))
    return spec


class Merger:
    """Merges two values according to a merge specification."""

    def __init__(self, spec: MergeSpec):
        self._options: dict[str, Any] = {}
        for name, options in spec:
            if name not in KINDS:
                raise MergeSpecError(f"unknown merger {name!r} (known: {', '.join(KINDS)})")
            self._options.setdefault(name, options if options is not None else [])

    @classmethod
    def from_string(cls, text: str) -> Merger:
        return cls(parse_merge_string(text))

    def merge(self, old: Any, new: Any) -> Any:
        if isinstance(old, dict) and "dict" in self._options:
            return self._merge_dict(old, new, self._options["dict"])
        if isinstance(old, (list, tuple)) and "list" in self._options:
            merged = self._merge_list(list(old), new, self._options["list"])
            return tuple(merged) if isinstance(old, tuple) and isinstance(merged, list) else merged
        if isinstance(old, str) and "str" in self._options:
            return old + new if "append" in self._options["str"] else new
        return old

    def _merge_dict(self, old: dict, new: Any, options: Any) -> dict:
        if not isinstance(new, dict):
            return old
        replace = "replace" in options
        recurse_list = "recurse_array" in options or "recurse_list" in options
        recurse_str = "recurse_str" in options
        allow_delete = "allow_delete" in options
        merged = dict(old)
        for key, value in new.items():
            if key not in merged:
                merged[key] = value
            elif value is None and allow_delete:
                del merged[key]
            elif replace:
                merged[key] = value
            elif (isinstance(value, dict) or (recurse_list and isinstance(value, (list, tuple)))
                  or (recurse_str and isinstance(value, str))):
                merged[key] = self.merge(merged[key], value)
        return merged

    def _merge_list(self, old: list, new: Any, options: Any) -> Any:
        method = next((m for m in ("append", "prepend", "replace", "no_replace") if m in options),
                      "replace")
        if method == "replace" and not isinstance(new, (list, tuple)):
            return new
        if method == "prepend":
            return [*new, *old]
        if method == "append":
            return [*old, *new]
        recurse = {"list": "recurse_array" in options or "recurse_list" in options,
                   "str": "recurse_str" in options, "dict": "recurse_dict" in options}
        merged = list(old)
        for i in range(min(len(merged), len(new))):
            if method == "no_replace":
                continue
            item = new[i]
            if ((recurse["list"] and isinstance(item, (list, tuple)))
                    or (recurse["str"] and isinstance(item, str))
                    or (recurse["dict"] and isinstance(item, dict))):
                merged[i] = self.merge(merged[i], item)
            else:
                merged[i] = item
        return merged


def merge_configs(configs: Sequence[dict]) -> dict:
    """Merge whole configurations, earlier ones winning (each may carry its own ``merge_how``)."""
    merged: dict = {}
    for config in configs:
        if not config:
            continue
        config = dict(config)
        spec = pop_merge_spec(config) or parse_merge_string(CONFIG_DEFAULT)
        merged = Merger(spec).merge(merged, config)
    return merged


def merge_vendor_under_user(vendor_cfg: dict | None, user_cfg: dict | None) -> dict:
    """The configuration the modules see: user-data's cloud-config over vendor-data's.

    Vendor keys only fill in what the user did not set (nested dicts are merged key by key).
    """
    return merge_configs([user_cfg or {}, vendor_cfg or {}])
