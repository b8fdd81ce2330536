"""Cloud-config validation against the schema fragments the modules declare.

A small validator for the JSON-schema subset the fragments use (type, properties,
additionalProperties, required, items, enum, oneOf/anyOf, minItems, minimum/maximum, pattern,
deprecated), so validating at boot needs no third-party library. Every problem names the key
path and, when the source text is known, its line. Unknown top-level keys get a warning with
the closest known key; deprecated keys say what replaces them.

Knowing every key means importing every module. ``cloudseed install --with-package`` therefore
writes the merged fragments to ``data/module-schema.json`` beside the installed package, stamped
with the name, size and mtime of each module file; at boot that file is used while the stamp
still matches (about half a second less in an emulated boot), and the modules are imported when not.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

# Keys the core itself reads (not owned by a module).
CORE_PROPERTIES: dict[str, Any] = {
    "datasource_list": {"type": "array", "items": {"type": "string"}},
    "datasource": {"type": "object"},
    "cloud_init_modules": {"type": "array"},
    "cloud_config_modules": {"type": "array"},
    "cloud_final_modules": {"type": "array"},
    "system_info": {"type": "object"},
    "network": {"type": "object"},
    "merge_how": {"type": ["string", "array"]},
    "merge_type": {"type": ["string", "array"]},
    "vendor_data2": {"type": "object"},
    "launch-index": {"type": "integer"},
    "manual_cache_clean": {"type": "boolean"},
    "_doc": {"type": "string"},
    # where each stage's stdout/stderr go (cloudseed/agent/output.py): "> F", ">> F", "| CMD", [out, err]
    "output": {"type": "object", "additionalProperties": False, "properties": {
        mode: {"anyOf": [{"type": "string"},
                         {"type": "array", "items": {"type": ["string", "null"]}, "maxItems": 2},
                         {"type": "object", "additionalProperties": False,
                          "properties": {"output": {"type": "string"}, "error": {"type": "string"}}}]}
        for mode in ("all", "init", "config", "final")}},
}

_TYPES = {
    "string": str, "integer": int, "number": (int, float), "boolean": bool,
    "array": list, "object": dict, "null": type(None),
}


@dataclass
class Problem:
    path: str
    message: str
    level: str = "error"  # "error" | "warning" | "deprecated"
    line: int | None = None

    def __str__(self) -> str:
        where = self.path or "(top level)"
        if self.line is not None:
            where += f" (line {self.line})"
        return f"{where}: {self.message}"


PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA_CACHE = os.path.join("data", "module-schema.json")


def module_schema() -> dict[str, Any]:
    """The properties every module declares, merged with the core's."""
    cached = _cached_module_schema(PACKAGE_DIR)
    return cached if cached is not None else build_module_schema()


def build_module_schema() -> dict[str, Any]:
    """The merged schema, from the modules themselves (imports all of them)."""
    from cloudseed.agent.modules import all_module_names, load_module

    properties = dict(CORE_PROPERTIES)
    for name in all_module_names():
        try:
            spec, _ = load_module(name)
        except ImportError:
            continue
        properties.update((spec.schema or {}).get("properties", {}))
    return {"type": "object", "properties": properties}


def modules_stamp(package_dir: str) -> list[list[Any]]:
    """Name, size and mtime of every module file of the package at ``package_dir``."""
    stamp = []
    with os.scandir(os.path.join(package_dir, "agent", "modules")) as entries:
        for entry in entries:
            if entry.name.endswith(".py"):
                info = entry.stat()
                stamp.append([entry.name, info.st_size, info.st_mtime_ns])
    return sorted(stamp)


def write_schema_cache(package_dir: str) -> str:
    """Write the merged schema beside the (installed) package at ``package_dir``; returns the path."""
    path = os.path.join(package_dir, SCHEMA_CACHE)
    body = {"stamp": modules_stamp(package_dir), "schema": build_module_schema()}
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(body, f, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return path


def _cached_module_schema(package_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(package_dir, SCHEMA_CACHE)) as f:
            cached = json.load(f)
        if cached.get("stamp") == modules_stamp(package_dir) and isinstance(cached.get("schema"), dict):
            return cached["schema"]
    except (OSError, ValueError, AttributeError):
        pass
    return None


def _type_ok(value: Any, wanted: str) -> bool:
    if wanted in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES.get(wanted, object))


def _type_name(value: Any) -> str:
    for name in _TYPES:
        if name != "number" and _type_ok(value, name):
            return name
    return type(value).__name__


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def check(value: Any, schema: dict, path: str = "") -> list[Problem]:
    """Problems of ``value`` against ``schema`` (a JSON-schema subset)."""
    problems: list[Problem] = []
    if schema.get("deprecated"):
        note = schema.get("deprecated_description") or "it will be removed"
        problems.append(Problem(path, f"deprecated: {note}", "deprecated"))
    for combinator in ("oneOf", "anyOf"):
        if combinator in schema:
            options = schema[combinator]
            results = [check(value, option, path) for option in options]
            if not any(not [p for p in r if p.level == "error"] for r in results):
                expected = sorted({t for o in options for t in _as_list(o.get("type"))}) or ["a valid value"]
                detail = min(results, key=len) if results else []
                if len(expected) > 1 or not detail:
                    problems.append(Problem(path, f"expected {' or '.join(expected)}, got {_describe(value)}"))
                else:
                    problems.extend(detail)
                return problems
    types = _as_list(schema.get("type"))
    if types and not any(_type_ok(value, t) for t in types):
        problems.append(Problem(path, f"expected {' or '.join(types)}, got {_describe(value)}"))
        return problems
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(repr(v) for v in schema["enum"])
        problems.append(Problem(path, f"{value!r} is not one of {allowed}"))
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        problems.append(Problem(path, f"{value!r} does not match the expected form {schema['pattern']}"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(Problem(path, f"{value} is less than the minimum {schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(Problem(path, f"{value} is more than the maximum {schema['maximum']}"))
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append(Problem(path, f"needs at least {schema['minItems']} item(s)"))
        if isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                problems.extend(check(item, schema["items"], _join(path, index)))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                problems.append(Problem(path, f"missing required key {key!r}"))
        for key, item in value.items():
            if key in properties:
                problems.extend(check(item, properties[key], _join(path, key)))
            elif isinstance(schema.get("additionalProperties"), dict):
                problems.extend(check(item, schema["additionalProperties"], _join(path, key)))
            elif schema.get("additionalProperties") is False:
                problems.append(Problem(_join(path, key), f"unknown key{_suggest(str(key), properties)}"))
    return problems


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{_type_name(value)} {text if len(text) <= 40 else text[:37] + '...'}"


def _suggest(key: str, known: dict) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def validate_config(cfg: dict, text: str | None = None) -> list[Problem]:
    """All problems of a cloud-config: errors, deprecations, and unknown top-level keys."""
    schema = module_schema()
    problems = check(cfg, schema)
    for key in cfg:
        if key not in schema["properties"]:
            problems.append(Problem(str(key), f"unknown key{_suggest(str(key), schema['properties'])}", "warning"))
    if text is not None:
        lines = key_lines(text)
        for problem in problems:
            problem.line = lines.get(problem.path)
    return problems


def key_lines(text: str) -> dict[str, int]:
    """1-based line of every key path in a YAML document (``a.b[2].c`` style)."""
    import yaml

    lines: dict[str, int] = {}
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lines

    def walk(n: Any, path: str) -> None:
        if isinstance(n, yaml.MappingNode):
            for key_node, value_node in n.value:
                sub = _join(path, key_node.value)
                lines.setdefault(sub, key_node.start_mark.line + 1)
                walk(value_node, sub)
        elif isinstance(n, yaml.SequenceNode):
            for index, item in enumerate(n.value):
                sub = _join(path, index)
                lines.setdefault(sub, item.start_mark.line + 1)
                walk(item, sub)

    if node is not None:
        walk(node, "")
    return lines
