"""Cloud-config validation against the schema fragments the modules declare.

The fragments are checked with ``validator`` (a small JSON-schema validator that knows nothing of
the modules).

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
from typing import Any

from cloudseed.agent.config.validator import _SHOW_VALUES, Problem, _join, check, suggest

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
                  os_release: dict[str, str] | None = None, user_data: bool = True) -> list[Problem]:
    """Top-level keys cloudseed does not do here, each saying which of two kinds it is.

    A key a cloudseed module declares is implemented and gives nothing, unless that module does
    not support this distro. A key cloud-init documents (``known_keys``) is "not done by cloudseed
    here, because ..." with the reason (the module is for another distro or platform, or cloudseed
    does not implement it yet): a warning. Any other key is unknown, an error as in cloud-init 24.x+
    (22.4 let it pass), with a did-you-mean only when one is close.
    ``os_release`` (the target's ``/etc/os-release`` as a dict) makes the reasons name this system.
    In ``user_data`` (not a system configuration file), a key cloud-init reads from the system
    configuration only (``known_keys.SYSTEM_ONLY_KEYS``) is an error, as in cloud-init 24.x+.
    """
    from cloudseed.agent.config.known_keys import CORE_KEYS, MODULES, SYSTEM_ONLY_KEYS

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
        if user_data and key in SYSTEM_ONLY_KEYS:
            what = f" ({CORE_KEYS[key]})" if key in CORE_KEYS else ""
            problems.append(Problem(key, f"`{key}` is a system configuration setting{what}: it belongs in "
                                         "/etc/cloud/cloud.cfg.d/*.cfg, not in user-data (where cloud-init 24.x and "
                                         "later refuse it too)"))
            continue
        if user_data and key == "system_info":  # cloud-init 24.2+ says so of user-data and vendor-data
            problems.append(Problem(key, "deprecated since cloud-init 24.2: system and distro settings are not meant "
                                         "to be overridden by user-data or vendor-data", "deprecated"))
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
                    os_release: dict[str, str] | None = None, show_values: bool = True,
                    user_data: bool = True) -> list[Problem]:
    """All problems of a cloud-config: errors, deprecations, and keys not done here (see classify_keys).

    ``show_values=False`` keeps the user's values out of the messages (they name keys and types only).
    ``user_data=False``: a system configuration file, where the system's own settings are at home.
    """
    schema = module_schema()
    _SHOW_VALUES[0] = show_values
    try:
        found = check(cfg, schema) + classify_keys(cfg, schema, os_release, user_data)
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
