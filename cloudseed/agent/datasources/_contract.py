"""The contract of a datasource file (``cloudseed/agent/datasources/<name>.py``), for tests and tools.

Never imported at boot (it imports typing). The file sets ``DATASOURCE`` to a ``Datasource``
subclass; ``DatasourcePlugin`` is what that class declares. Detection is data: ``detection``,
a tuple of facts (``_facts.py``; the fallback datasource, never detected, declares none). The
Python detection (``why``, ``identified``, ``detect``) and the shell generator are derived from
it; none of them is overridden. ``detection_problems`` lists what the shell compiler and the
derived detection cannot take (see ``cloudseed.agent.boot.generator_shell``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, ClassVar, Optional, Protocol

from cloudseed.agent.datasources import LOCAL, NETWORK, Datasource, DatasourceContext, _facts, datasource_class


class DatasourcePlugin(Protocol):
    """What a datasource class declares."""

    name: ClassVar[str]  # as written in datasource_list ("NoCloud"); the file is its lower case
    stages: ClassVar[tuple[str, ...]]  # "local" (no network needed) and/or "network"
    platform: ClassVar[str]
    sensitive_keys: ClassVar[tuple[str, ...]]  # instance-data keys only root may read
    fallback: ClassVar[bool]  # the last resort (None): used when nothing answered, never detected
    detection: ClassVar[tuple[Any, ...]]  # facts (``_facts.py``), tried in order

    @classmethod
    def why(cls, ctx: DatasourceContext) -> Optional[str]: ...

    def fetch(self) -> bool: ...


# what tests/architecture/protocol_check.py checks first: (the part of the file, its Protocol)
PROTOCOLS = (("DATASOURCE", DatasourcePlugin),)


def problems(plugin: ModuleType, stem: str) -> list[str]:
    """Every way the datasource file ``stem``.py breaks its contract."""
    cls = getattr(plugin, "DATASOURCE", None)
    if not (isinstance(cls, type) and issubclass(cls, Datasource)):
        return [f"DATASOURCE is {cls!r}, not a Datasource subclass"]
    found: list[str] = []
    try:
        resolved = datasource_class(cls.name)
    except (ImportError, AttributeError) as e:
        resolved = None
        found.append(f"DATASOURCE.name {cls.name!r} does not lead back to this file ({e})")
    if resolved is not None and resolved is not cls:
        found.append(f"DATASOURCE.name {cls.name!r} leads to {resolved.__module__}, not {stem}.py")
    if not cls.stages or any(stage not in (LOCAL, NETWORK) for stage in cls.stages):
        found.append(f"DATASOURCE.stages {cls.stages!r}: one or both of {LOCAL!r}, {NETWORK!r}")
    for hook in ("detect", "why", "identified"):
        if _declared(cls, hook):
            found.append(f"DATASOURCE overrides {hook}(); it is derived from the declared detection")
    if not cls.fallback and not cls.detection:
        found.append("DATASOURCE declares no detection: how is it detected?")
    found += detection_problems(cls)
    if not _declared(cls, "fetch"):
        found.append("DATASOURCE declares no fetch()")
    return found


def _declared(cls: type, hook: str) -> bool:
    """``hook`` is declared by the class or a shared base of its own (such as
    ``_metadata_service.MetadataServiceDatasource``), not only by ``Datasource`` itself."""
    return any(hook in vars(k) for k in cls.__mro__ if k is not Datasource and issubclass(k, Datasource))


PATTERN_CHARS = "*?[]"


def pattern_problems(pattern: Any, where: str) -> list[str]:
    """A pattern is a non-empty string of literal characters, ``*``, ``?`` and ``[chars]`` (no
    ranges, negation or backslash: the Python matcher and the shell's ``case`` must agree)."""
    if not isinstance(pattern, str) or not pattern:
        return [f"{where}: pattern {pattern!r} is not a non-empty string"]
    if "\\" in pattern or "\n" in pattern:
        return [f"{where}: pattern {pattern!r} has a backslash or a newline"]
    depth_ok, i = True, 0
    while i < len(pattern):
        if pattern[i] == "[":
            end = pattern.find("]", i + 1)
            inner = pattern[i + 1:end]
            if end < 0 or not inner or inner[0] in "!^" or "-" in inner or "[" in inner:
                depth_ok = False
                break
            i = end
        elif pattern[i] == "]":
            depth_ok = False
            break
        i += 1
    return [] if depth_ok else [f"{where}: pattern {pattern!r}: a [set] lists plain characters, closed by ]"]


def detection_problems(cls: type) -> list[str]:
    """Everything wrong with ``cls.detection``: what the derived detection or the shell cannot take."""
    found: list[str] = []
    if not isinstance(cls.detection, tuple):
        return [f"detection is {type(cls.detection).__name__}, not a tuple of facts"]
    for number, fact in enumerate(cls.detection, 1):
        where = f"detection[{number}]"
        if not isinstance(fact, _facts.Fact):
            found.append(f"{where} is {fact!r}, not a fact of _facts.py")
            continue
        if fact.stages is not None and (not fact.stages or set(fact.stages) - set(cls.stages)):
            found.append(f"{where}: stages {fact.stages!r} are not some of the datasource's {cls.stages!r}")
        if fact.children() and not fact.why:
            found.append(f"{where}: a combination needs its reason (why=...)")
        found += _tree_problems(fact, where, top=True)
        found += _disk_problems(fact, where)
    return found


def _tree_problems(fact: Any, where: str, top: bool) -> list[str]:
    found: list[str] = []
    if not isinstance(fact, _facts.Fact):
        return [f"{where}: {fact!r} is not a fact of _facts.py"]
    if not top and fact.stages is not None:
        found.append(f"{where}: stages belong on the top-level fact")
    name = type(fact).__name__
    patterns: tuple = ()
    if isinstance(fact, (_facts.Dmi, _facts.Cmdline, _facts.FileText)):
        patterns = fact.patterns
        if not patterns:
            found.append(f"{where}: {name} without a pattern")
    elif isinstance(fact, _facts.Setting):
        patterns = fact.patterns
    elif isinstance(fact, _facts.Disk):
        patterns = fact.labels + tuple(p for p in (fact.uuid, fact.uuid_not) if p is not None)
        if not fact.labels or not fact.fstypes:
            found.append(f"{where}: Disk needs labels and filesystem types")
        if fact.udev_hint and any(c in label for label in fact.labels for c in PATTERN_CHARS):
            found.append(f"{where}: udev_hint names a label link, so its labels are plain names")
    elif isinstance(fact, _facts.Path):
        if not fact.paths or fact.kind not in _facts.PATH_KINDS:
            found.append(f"{where}: Path needs paths and a kind of {_facts.PATH_KINDS}")
        if any(not p.startswith("/") or "*" in p for p in fact.paths):
            found.append(f"{where}: Path paths are absolute, without *")
        if any(not n or any(c.isspace() or c in PATTERN_CHARS + "/" for c in n) for n in fact.inside):
            found.append(f"{where}: Path inside= names are plain file names (no blank, glob or /)")
    elif isinstance(fact, _facts.FileText) and (not fact.path.startswith("/")):
        found.append(f"{where}: FileText path is absolute")
    elif isinstance(fact, _facts.Hatch):
        if not fact.name.isidentifier():
            found.append(f"{where}: hatch name {fact.name!r} is not an identifier")
        if fact.shell is None and not fact.shell_note:
            found.append(f"{where}: hatch {fact.name} has no shell side and no shell_note saying why")
        if fact.shell is not None and not fact.why:
            found.append(f"{where}: hatch {fact.name} needs its reason (why=...) for the shell")
    for pattern in patterns:
        found += pattern_problems(pattern, f"{where} ({name})")
    for index, child in enumerate(fact.children(), 1):
        found += _tree_problems(child, f"{where}.{index}", top=False)
    return found


def _disk_problems(fact: Any, where: str) -> list[str]:
    """A fact that probes disks is one the shell evaluates per device in its one blkid probe, its
    other facts settled before: in an AllOf the part with the Disk comes last (so Python too probes
    only once the rest holds, and what it found is the devices), never under Not, and an AllOf
    joins at most one such part."""
    if not any(leaf.disk for leaf in _facts.leaves(fact)):
        return []
    found = []

    def walk(node: Any) -> None:
        kids = node.children()
        with_disk = [any(x.disk for x in _facts.leaves(k)) for k in kids]
        if isinstance(node, _facts.Not) and any(with_disk):
            found.append(f"{where}: Not over a Disk fact")
        if isinstance(node, _facts.AllOf) and sum(with_disk) > 1:
            found.append(f"{where}: an AllOf of two Disk facts (the shell probes one device at a time)")
        elif isinstance(node, _facts.AllOf) and any(with_disk[:-1]):
            found.append(f"{where}: its Disk facts must come after its other facts")
        for kid in kids:
            walk(kid)

    walk(fact)
    return found
