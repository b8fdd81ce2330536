"""Cloud-config YAML parsed once per instance, kept as JSON beside the instance's user-data.

A reboot processes the same user-data again, and PyYAML's import and parse were the largest part
of a reboot's network stage in the lab guest under emulation. A document is kept only when JSON
holds it exactly (string keys; strings, numbers, booleans, nulls, lists and mappings: no dates,
binary or sets); any other document is parsed at every boot. The file is keyed by the exact text,
so changed user-data is parsed again, and it is written 0600 (it holds user-data).
"""

from __future__ import annotations

import json
import math

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

FORMAT = 1
FILE_NAME = "cloud-config.parsed.json"  # in the instance's directory
_MISSING = object()


class InvalidYaml(ValueError):
    """The text is not YAML; the message says where and why."""


class KeptYaml:
    """Parsed documents by their text: the ones this boot used, read from the last boot's file."""

    def __init__(self, saved: str | bytes | None = None):
        self._saved: dict[str, str] = {}
        self._used: dict[str, str] = {}
        try:
            loaded = json.loads(saved) if saved else None
        except ValueError:
            loaded = None  # damaged: everything is parsed again and the file rewritten
        if isinstance(loaded, dict) and loaded.get("format") == FORMAT and isinstance(loaded.get("entries"), dict):
            self._saved = {k: v for k, v in loaded["entries"].items() if isinstance(v, str)}

    def get(self, text: str) -> Any:
        """A fresh copy of the document parsed from ``text`` before, else ``_MISSING``."""
        kept = self._used.get(text, self._saved.get(text))
        if kept is None:
            return _MISSING
        try:
            data = json.loads(kept)
        except ValueError:
            return _MISSING
        self._used[text] = kept
        return data

    def learn(self, other: KeptYaml) -> None:
        """Also know the documents ``other`` parsed (this boot, earlier in the process)."""
        for text, kept in other._used.items():
            self._saved.setdefault(text, kept)

    def put(self, text: str, data: Any) -> None:
        if _json_holds(data):
            self._used[text] = json.dumps(data, sort_keys=False)

    def text(self) -> str:
        """The file's content: the documents this boot used (others drop out)."""
        return json.dumps({"format": FORMAT, "entries": self._used}, sort_keys=True) + "\n"


def load_cloud_config_yaml(text: str, kept: KeptYaml | None = None) -> Any:
    """``text`` parsed as YAML (safely, aliases bounded), from ``kept`` when it was parsed before."""
    if kept is not None:
        data = kept.get(text)
        if data is not _MISSING:
            return data
    import yaml

    from cloudseed.core.yaml_loading import describe_yaml_error, load_yaml

    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise InvalidYaml(describe_yaml_error(e)) from None
    if kept is not None:
        kept.put(text, data)
    return data


def _json_holds(value: Any) -> bool:
    """Does a JSON round trip give back exactly ``value`` (same types, same keys)?"""
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_json_holds(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_holds(v) for k, v in value.items())
    return False
