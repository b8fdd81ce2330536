"""The contract of a module file (``cloudseed/agent/modules/<name>.py``), for tests and tools.

Never imported at boot (it imports typing). ``ModulePlugin`` is what the file declares,
``ModuleDeclaration`` the fields of its ``MODULE`` (a ``ModuleSpec``); ``problems`` adds the
rules a type cannot say (the name is the file's, the stage and frequency exist, the schema is a
JSON-schema ``{"properties": ...}``, the examples are cloud-config mappings).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Protocol

from cloudseed.agent.modules import STAGE_LIST_KEYS, ModuleContext, ModuleSpec


class ModuleDeclaration(Protocol):
    """The fields of ``MODULE``."""

    name: str
    stage: str
    frequency: str
    activate_by: tuple[str, ...]  # run only when one of these keys is configured; () = always
    distros: tuple[str, ...]  # distro families it supports; () = all
    schema: dict[str, Any]  # {"properties": {...}} for the keys it owns
    title: str
    examples: tuple[str, ...]  # cloud-config documents showing its keys


class ModulePlugin(Protocol):
    """What a module file declares."""

    MODULE: ModuleSpec

    def handle(self, ctx: ModuleContext) -> None: ...


# what tests/architecture/protocol_check.py checks first: (the part of the file, its Protocol)
PROTOCOLS = ((None, ModulePlugin), ("MODULE", ModuleDeclaration))


def problems(plugin: ModuleType, stem: str, known_keys: set[str] | None = None,
             families: set[str] | None = None) -> list[str]:
    """Every way the module file ``stem``.py breaks its contract.

    ``known_keys`` (every key some module or the core declares) and ``families`` (the distro
    files) let the activation keys and the distros be checked too.
    """
    found: list[str] = []
    spec = plugin.MODULE
    from cloudseed.agent.state import FREQUENCIES

    if spec.name != stem:
        found.append(f"MODULE.name is {spec.name!r}, the file is {stem}.py")
    if spec.stage not in STAGE_LIST_KEYS:
        found.append(f"MODULE.stage {spec.stage!r} is not one of {', '.join(STAGE_LIST_KEYS)}")
    if spec.frequency not in FREQUENCIES:
        found.append(f"MODULE.frequency {spec.frequency!r} is not one of {', '.join(FREQUENCIES)}")
    if not spec.title.strip():
        found.append("MODULE.title is empty")
    properties = spec.schema.get("properties") if spec.schema else {}
    if spec.schema and not isinstance(properties, dict):
        found.append("MODULE.schema has no \"properties\" mapping")
        properties = {}
    for key, fragment in (properties or {}).items():
        if not isinstance(fragment, dict):
            found.append(f"MODULE.schema.properties.{key} is not a JSON-schema mapping")
    for key in spec.activate_by:
        if key not in (properties or {}) and (known_keys is None or key not in known_keys):
            found.append(f"MODULE.activate_by names {key!r}, which no schema declares")
    for family in spec.distros:
        if families is not None and family not in families:
            found.append(f"MODULE.distros names {family!r}, which no distro file declares")
    if properties and not spec.examples:
        found.append("MODULE.examples is empty (a module with configuration keys shows them)")
    for index, text in enumerate(spec.examples):
        found += [f"MODULE.examples[{index}]: {p}" for p in _example_problems(text)]
    return found


def _example_problems(text: str) -> list[str]:
    import yaml

    from cloudseed.core.yaml_loading import load_yaml

    try:
        cfg = load_yaml(text)
    except yaml.YAMLError as e:
        return [f"not YAML: {' '.join(str(e).split())}"]
    return [] if isinstance(cfg, dict) else ["not a cloud-config mapping"]
