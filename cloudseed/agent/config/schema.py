"""Cloud-config validation against the schema fragments the modules declare.

A small validator for the JSON-schema keywords the fragments use (type, enum, const, properties,
patternProperties, additionalProperties, propertyNames, required, min/maxProperties, items,
additionalItems, min/maxItems, uniqueItems, min/maxLength, pattern, minimum/maximum, oneOf,
anyOf, allOf, not, deprecated), so validating at boot needs no third-party library. As in
cloud-init, a YAML ``!!binary`` value counts as a string.

Every problem names the deepest key path that is wrong and, when the source text is known, its
line. When no branch of a ``oneOf``/``anyOf`` fits, the branch whose type matches the value is
the one reported, down to its own deepest problems. Top-level keys no module declares are told
apart by :func:`classify_keys`: a key cloud-init documents that cloudseed does not do here (with
the reason, from ``known_keys``), or a key nobody knows (a did-you-mean only when it is close).

Knowing every key means importing every module. ``cloudseed install --with-package`` therefore
writes the merged fragments to ``data/module-schema.json`` beside the installed package, stamped
with the name, size and mtime of each module file; at boot that file is used while the stamp
still matches (about half a second less in an emulated boot), and the modules are imported when not.
"""

from __future__ import annotations

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
    # event reporting (cloudseed/agent/reporting/): name -> handler settings (false removes one);
    # each handler checks its own settings and says what is wrong in the status
    "reporting": {"type": "object", "additionalProperties": {"type": ["object", "boolean", "null"]}},
    # fail closed (cloudseed/agent/boot/strict.py): any error (optionally any warning) fails the boot visibly
    "strict": {"anyOf": [{"type": "boolean"}, {"type": "object", "additionalProperties": False, "properties": {
        "enabled": {"type": "boolean"}, "warnings": {"type": "boolean"}, "allow_ssh": {"type": "boolean"},
        "allow_root_login": {"type": "boolean"}}}]},
    # false: sshd waits for the network stage at every boot, also the reboot of an unchanged
    # instance (cloudseed/agent/boot/sshd_order.py, docs/lab.md)
    "sshd_early_on_reboot": {"type": "boolean"},
    # the image's choice of status exit codes (cloudseed/commands/_status_contract.py)
    "status_exit_codes": {"type": "string", "enum": ["22.4", "23.4"]},
    # where each stage's stdout/stderr go (cloudseed/agent/state/output.py): "> F", ">> F", "| CMD", [out, err]
    "output": {"type": "object", "additionalProperties": False, "properties": {
        mode: {"anyOf": [{"type": "string"},
                         {"type": "array", "items": {"type": ["string", "null"]}, "maxItems": 2},
                         {"type": "object", "additionalProperties": False,
                          "properties": {"output": {"type": "string"}, "error": {"type": "string"}}}]}
        for mode in ("all", "init", "config", "final")}},
}

# where the merged schema records which module declares each key: {key: [module, [distros]]}
DECLARED_BY = "x-declared-by"

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


PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # cloudseed/
SCHEMA_CACHE = os.path.join("data", "module-schema.json")


def module_schema() -> dict[str, Any]:
    """The properties every module declares, merged with the core's."""
    cached = _cached_module_schema(PACKAGE_DIR)
    return cached if cached is not None else build_module_schema()


def build_module_schema() -> dict[str, Any]:
    """The merged schema, from the modules themselves (imports all of them)."""
    from cloudseed.agent.modules import all_module_names, load_module

    properties = dict(CORE_PROPERTIES)
    declared: dict[str, list[Any]] = {}
    for name in all_module_names():
        try:
            spec, _ = load_module(name)
        except ImportError:
            continue
        for key, fragment in (spec.schema or {}).get("properties", {}).items():
            properties[key] = _merge(properties[key], fragment) if key in properties else fragment
            declared.setdefault(key, [spec.name, sorted(spec.distros)])
    return {"type": "object", "properties": properties, DECLARED_BY: declared}


def _merge(first: dict, second: dict) -> dict:
    """Two modules declaring one key (``ssh``): objects merge their properties, others must both hold."""
    if first == second:
        return first
    if first.get("type") == "object" and second.get("type") == "object":
        merged = {**first, **second}
        merged["properties"] = {**first.get("properties", {}), **second.get("properties", {})}
        return merged
    return {"allOf": [first, second]}


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


def _os_words(os_release: dict[str, str] | None) -> set[str] | None:
    """The distro names this system answers to (os-release ID, ID_LIKE, cloudseed's family)."""
    if not os_release:
        return None
    from cloudseed.agent.distros import family_of

    words = {os_release.get("ID", "").lower(), family_of(os_release)}
    words.update(w.lower() for w in os_release.get("ID_LIKE", "").split())
    return words - {""}


def _names(distros: Any) -> list[str]:
    from cloudseed.agent.config.known_keys import DISTRO_NAMES

    return list(dict.fromkeys(DISTRO_NAMES.get(d, d) for d in distros))


def _not_here(key: str, module: str, facts: dict[str, Any], system: str | None) -> str:
    names = _names(facts["distros"])
    label = "/".join(names) + "-only" if len(names) <= 2 else "distro-specific"
    why = f" ({facts['why']})" if facts.get("why") else ""
    tail = f"not applicable to {system}" if system else f"only on {', '.join(names)}"
    return f"`{key}` belongs to cloud-init's {label} module {module}{why}: {tail}"


def classify_keys(cfg: dict, schema: dict | None = None,
                  os_release: dict[str, str] | None = None) -> list[Problem]:
    """Top-level keys cloudseed does not do here, each saying which of two kinds it is.

    A key a cloudseed module declares is implemented and gives nothing, unless that module does
    not support this distro. A key cloud-init documents (``known_keys``) is "not done by cloudseed
    here, because ..." with the reason (the module is for another distro or platform, or cloudseed
    does not implement it yet): a warning. Any other key is unknown, an error as in cloud-init 24.x+
    (22.4 let it pass), with a did-you-mean only when one is close.
    ``os_release`` (the target's ``/etc/os-release`` as a dict) makes the reasons name this system.
    """
    from cloudseed.agent.config.known_keys import CORE_KEYS, MODULES

    schema = schema if schema is not None else module_schema()
    properties = schema.get("properties", {})
    declared = schema.get(DECLARED_BY, {})
    ours = {owner[0] for owner in declared.values()}
    words = _os_words(os_release)
    system = (os_release or {}).get("ID") or None
    owners = {k: m for m, facts in MODULES.items() for k in facts["keys"]}
    problems = []
    for raw in cfg:
        key = str(raw)
        if key in properties:
            module, distros = (declared.get(key) or [None, []])[:2]
            if distros and words is not None and not words & set(distros):
                problems.append(Problem(key, f"not done by cloudseed here, because cloudseed's module {module} "
                                             f"runs only on {', '.join(_names(distros))}: not applicable to {system}",
                                        "warning"))
            continue
        module = owners.get(key)
        if module is not None:
            facts = MODULES[module]
            if facts.get("distros") and (words is None or not words & set(facts["distros"])):
                reason = _not_here(key, module, facts, system)
            elif module in ours:
                reason = f"cloudseed's module {module} does not implement `{key}`"
            else:
                reason = f"cloudseed does not implement cloud-init's module {module} yet"
            if facts.get("note"):
                reason += f" ({facts['note']})"
            problems.append(Problem(key, f"not done by cloudseed here, because {reason}", "warning"))
        elif key in CORE_KEYS:
            problems.append(Problem(key, f"not done by cloudseed here, because `{key}` is cloud-init's own setting "
                                         f"for {CORE_KEYS[key]}, which cloudseed does not read", "warning"))
        else:
            known = sorted(set(properties) | set(owners) | set(CORE_KEYS))
            # an error, as in cloud-init 24.x-26.x (22.4 let unknown top-level keys pass); at boot
            # every schema problem is only reported (userdata_stage._validate)
            problems.append(Problem(key, f"unknown key{suggest(key, known)}"))
    return problems


def validate_config(cfg: dict, text: str | None = None,
                    os_release: dict[str, str] | None = None, show_values: bool = True) -> list[Problem]:
    """All problems of a cloud-config: errors, deprecations, and keys not done here (see classify_keys).

    ``show_values=False`` keeps the user's values out of the messages (they name keys and types only).
    """
    schema = module_schema()
    _SHOW_VALUES[0] = show_values
    try:
        found = check(cfg, schema) + classify_keys(cfg, schema, os_release)
    finally:
        _SHOW_VALUES[0] = True
    # a key several modules declare (hostname: set_hostname, update_hostname...) is wrong once
    seen: set[tuple[str, str, str]] = set()
    problems = []
    for problem in found:
        if (problem.path, problem.message, problem.level) not in seen:
            seen.add((problem.path, problem.message, problem.level))
            problems.append(problem)
    if text is not None:
        lines = key_lines(text)
        for problem in problems:
            problem.line = lines.get(problem.path)
    return problems


def key_lines(text: str) -> dict[str, int]:
    """1-based line of every key path in a YAML document (``a.b[2].c`` style)."""
    import yaml

    from cloudseed.core.yaml_loading import compose_yaml

    lines: dict[str, int] = {}
    try:
        node = compose_yaml(text)   # an alias bomb would make the walk below endless
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
