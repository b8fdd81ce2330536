"""A small JSON-schema validator: cloud-config values checked against a schema fragment.

The keywords the modules' fragments use (type, enum, const, properties, patternProperties,
additionalProperties, propertyNames, required, min/maxProperties, items, additionalItems,
min/maxItems, uniqueItems, min/maxLength, pattern, minimum/maximum, oneOf, anyOf, allOf, not,
deprecated), so validating at boot needs no third-party library; a YAML ``!!binary`` value counts
as a string. ``check`` gives ``Problem``s naming the deepest key path that is wrong. It knows
nothing of the modules: ``schema`` (which collects their fragments, and so loads them) and any
module checking its own fragment (``modules/_system_tools.py``) both use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TYPES = {
    "string": (str, bytes), "integer": int, "number": (int, float), "boolean": bool,
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


def _type_ok(value: Any, wanted: str) -> bool:
    if wanted in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES.get(wanted, object))


def _type_name(value: Any) -> str:
    if isinstance(value, bytes):
        return "binary"
    for name in _TYPES:
        if name != "number" and _type_ok(value, name):
            return name
    return "number" if isinstance(value, float) else type(value).__name__


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.level == "error"]


def check(value: Any, schema: dict, path: str = "") -> list[Problem]:
    """Problems of ``value`` against ``schema`` (a JSON-schema subset), deepest paths first named."""
    problems: list[Problem] = []
    if not isinstance(schema, dict):
        return problems
    if schema.get("deprecated"):
        note = schema.get("deprecated_description") or "it will be removed"
        since = f" since cloud-init {schema['deprecated_version']}" if schema.get("deprecated_version") else ""
        problems.append(Problem(path, f"deprecated{since}: {note}", "deprecated"))
    types = _as_list(schema.get("type"))
    if types and not any(_type_ok(value, t) for t in types):
        problems.append(Problem(path, f"expected {' or '.join(types)}, got {_describe(value)}"))
        return problems
    for combinator in ("oneOf", "anyOf"):
        if isinstance(schema.get(combinator), list):
            problems.extend(_alternatives(value, schema[combinator], path, exactly_one=combinator == "oneOf"))
    for part in schema.get("allOf", []):
        problems.extend(check(value, part, path))
    if isinstance(schema.get("not"), dict) and not _errors(check(value, schema["not"], path)):
        problems.append(Problem(path, f"{_describe(value)} is not allowed here"))
    if "enum" in schema and not any(_same(value, v) for v in schema["enum"]):
        allowed = ", ".join(_literal(v) for v in schema["enum"])
        problems.append(Problem(path, f"{_show(value)} is not one of {allowed}"))
    if "const" in schema and not _same(value, schema["const"]):
        problems.append(Problem(path, f"{_show(value)} must be {_literal(schema['const'])}"))
    if isinstance(value, (str, bytes)):
        problems.extend(_check_string(value, schema, path))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        problems.extend(_check_number(value, schema, path))
    elif isinstance(value, list):
        problems.extend(_check_array(value, schema, path))
    elif isinstance(value, dict):
        problems.extend(_check_object(value, schema, path))
    return problems


def _alternatives(value: Any, options: list, path: str, exactly_one: bool) -> list[Problem]:
    """A ``oneOf``/``anyOf``: the fitting branch's own problems when none holds."""
    results = [check(value, option, path) for option in options]
    passing = [r for r in results if not _errors(r)]
    if passing:
        if exactly_one and len(passing) > 1:
            return [Problem(path, f"{_describe(value)} matches {len(passing)} of the allowed forms; "
                                  "it must match exactly one")]
        return passing[0]
    fitting = [r for option, r in zip(options, results) if _fits(value, option)]
    missing = [_missing_key(r, path) for r in fitting]
    if len(missing) > 1 and all(missing):  # branches that differ only by the key they require
        return [Problem(path, f"missing required key {missing[0]!r} (or {', '.join(repr(k) for k in missing[1:])})")]
    if not fitting:
        expected = sorted({t for option in options for t in _types_of(option)}) or ["a valid value"]
        return [Problem(path, f"expected {' or '.join(expected)}, got {_describe(value)}")]
    # the branch with the fewest problems, then the deepest ones
    return min(fitting, key=lambda r: (len(_errors(r)), -max(_depth(p.path) for p in _errors(r))))


def _missing_key(problems: list[Problem], path: str) -> str | None:
    """The key a branch's only problem says is missing, if that is its only problem."""
    found = _errors(problems)
    if len(found) == 1 and found[0].path == path and found[0].message.startswith("missing required key "):
        return found[0].message[len("missing required key "):].strip("'")
    return None


def _fits(value: Any, schema: dict) -> bool:
    """Whether ``value`` has a type ``schema`` allows (what is inside is not looked at)."""
    if not isinstance(schema, dict):
        return True
    types = _as_list(schema.get("type"))
    if types:
        return any(_type_ok(value, t) for t in types)
    for combinator in ("oneOf", "anyOf"):
        if isinstance(schema.get(combinator), list):
            return any(_fits(value, option) for option in schema[combinator])
    for literal in ([schema["const"]] if "const" in schema else schema.get("enum", [])):
        if _type_name(literal) == _type_name(value):
            return True
    return "enum" not in schema and "const" not in schema


def _types_of(schema: dict) -> list[str]:
    if not isinstance(schema, dict):
        return []
    types = _as_list(schema.get("type"))
    if types:
        return types
    nested = [t for c in ("oneOf", "anyOf") for o in schema.get(c, []) for t in _types_of(o)]
    if nested:
        return nested
    return [_type_name(v) for v in ([schema["const"]] if "const" in schema else schema.get("enum", []))]


def _depth(path: str) -> int:
    return path.count(".") + path.count("[") + (1 if path else 0)


def _same(value: Any, literal: Any) -> bool:
    """JSON equality: ``True`` is not ``1``."""
    return value == literal and isinstance(value, bool) == isinstance(literal, bool)


def _check_string(value: str | bytes, schema: dict, path: str) -> list[Problem]:
    problems = []
    if "minLength" in schema and len(value) < schema["minLength"]:
        problems.append(Problem(path, "must not be empty" if schema["minLength"] == 1
                                else f"needs at least {schema['minLength']} character(s)"))
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        problems.append(Problem(path, f"is longer than {schema['maxLength']} character(s)"))
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        problems.append(Problem(path, f"{_show(value)} does not match the expected form {schema['pattern']}"))
    return problems


def _check_number(value: float, schema: dict, path: str) -> list[Problem]:
    problems = []
    if "minimum" in schema and value < schema["minimum"]:
        problems.append(Problem(path, f"{_show(value)} is less than the minimum {schema['minimum']}"))
    if "maximum" in schema and value > schema["maximum"]:
        problems.append(Problem(path, f"{_show(value)} is more than the maximum {schema['maximum']}"))
    low, high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(low, (int, float)) and not isinstance(low, bool) and value <= low:
        problems.append(Problem(path, f"{_show(value)} must be more than {low}"))
    if isinstance(high, (int, float)) and not isinstance(high, bool) and value >= high:
        problems.append(Problem(path, f"{_show(value)} must be less than {high}"))
    if schema.get("multipleOf") and value % schema["multipleOf"]:
        problems.append(Problem(path, f"{_show(value)} is not a multiple of {schema['multipleOf']}"))
    return problems


def _check_array(value: list, schema: dict, path: str) -> list[Problem]:
    problems = []
    if "minItems" in schema and len(value) < schema["minItems"]:
        problems.append(Problem(path, "must not be empty" if schema["minItems"] == 1
                                else f"needs at least {schema['minItems']} item(s)"))
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        problems.append(Problem(path, f"has {len(value)} items, at most {schema['maxItems']} allowed"))
    if schema.get("uniqueItems"):
        seen: list[Any] = []
        for index, item in enumerate(value):
            if any(_same(item, earlier) for earlier in seen):
                problems.append(Problem(_join(path, index), f"{_show(item)} is repeated; items must be unique"))
            seen.append(item)
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            problems.extend(check(item, items, _join(path, index)))
    elif isinstance(items, list):
        extra = schema.get("additionalItems", True)
        for index, item in enumerate(value):
            if index < len(items):
                problems.extend(check(item, items[index], _join(path, index)))
            elif extra is False:
                problems.append(Problem(_join(path, index), f"at most {len(items)} item(s) allowed here"))
            elif isinstance(extra, dict):
                problems.extend(check(item, extra, _join(path, index)))
    return problems


def _check_object(value: dict, schema: dict, path: str) -> list[Problem]:
    problems = []
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    for key in schema.get("required", []):
        if key not in value:
            problems.append(Problem(path, f"missing required key {key!r}"))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        problems.append(Problem(path, "must not be empty" if schema["minProperties"] == 1
                                else f"needs at least {schema['minProperties']} key(s)"))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        problems.append(Problem(path, f"has {len(value)} keys, at most {schema['maxProperties']} allowed"))
    for key, needs in (schema.get("dependencies") or {}).items():
        if key in value and isinstance(needs, list):
            for other in needs:
                if other not in value:
                    problems.append(Problem(path, f"{key!r} needs {other!r} too"))
    names = schema.get("propertyNames")
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        sub = _join(path, key)
        if isinstance(names, dict):
            problems.extend(Problem(sub, f"not a valid key: {p.message}") for p in _errors(check(key, names, sub)))
        matched = False
        if key in properties:
            problems.extend(check(item, properties[key], sub))
            matched = True
        for pattern, fragment in patterns.items():
            if isinstance(key, str) and re.search(pattern, key):
                problems.extend(check(item, fragment, sub))
                matched = True
        if matched:
            continue
        if isinstance(additional, dict):
            problems.extend(check(item, additional, sub))
        elif additional is False:
            hint = suggest(str(key), list(properties)) if properties else ""
            if not hint and patterns:
                hint = f" (keys here look like {' or '.join(patterns)})"
            problems.append(Problem(sub, f"unknown key{hint}"))
    return problems


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


# Whether messages may quote the user's values: yes for ``cloudseed schema`` on the user's own
# terminal, no at boot, where messages reach the world-readable status (a password under a
# mistyped key must not); see validate_config(show_values=...)
_SHOW_VALUES = [True]


def _show(value: Any) -> str:
    """A user's value for a message: as written (see _literal), or only its type at boot."""
    if not _SHOW_VALUES[0]:
        if value is None:
            return "null"
        name = _type_name(value)
        return f"{'an' if name[0] in 'aeiou' else 'a'} {name} value"
    return _literal(value)


def _literal(value: Any) -> str:
    """A value as written in YAML (``true``, ``null``, ``'text'``), shortened."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text = repr(value) if not isinstance(value, bytes) else f"<{len(value)} bytes>"
    return text if len(text) <= 40 else text[:37] + "..."


def _describe(value: Any) -> str:
    """``integer 3`` (the type, then the value as written), or the type alone at boot: ``integer``."""
    if value is None:
        return "null"
    return f"{_type_name(value)} {_literal(value)}" if _SHOW_VALUES[0] else _type_name(value)


def _distance(a: str, b: str) -> int:
    """Edits (insert, delete, replace, swap two neighbours) that turn ``a`` into ``b``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], previous2[j - 2] + 1)
        previous2, previous = previous, row
    return previous[-1]


def close_matches(word: str, known: list[str]) -> list[str]:
    """Known words within a typo or two of ``word`` (fewer for short words), closest first.

    An edit is one letter inserted, deleted or replaced, or two neighbours swapped; ``-`` and ``_``
    and the case do not count. A word of three letters or less is too short to guess from.
    """
    limit = 0 if len(word) <= 3 else 1 if len(word) <= 5 else 2 if len(word) <= 12 else 3
    scored = []
    for candidate in known:
        if candidate == word or abs(len(candidate) - len(word)) > limit:
            continue
        folded = word.lower().replace("-", "_")
        d = 0 if folded == candidate.lower().replace("-", "_") else _distance(word.lower(), candidate.lower())
        if d <= limit:
            scored.append((d, candidate))
    return [c for _, c in sorted(scored)]


def suggest(key: str, known: list[str]) -> str:
    """`` (did you mean 'x'?)`` when a known key is close to ``key``, else ``""``."""
    close = close_matches(key, known)
    return f" (did you mean {close[0]!r}?)" if close else ""
