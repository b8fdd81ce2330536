"""Detection declared as data: the facts a datasource lists in ``detection``, and their evaluation.

A datasource declares ``detection = (fact, ...)``. The first fact that holds is why the datasource
may exist here (``Datasource.why``); when none holds it cannot. The same declarations are compiled
into the platform section of the shell generator (``cloudseed.agent.boot.generator_shell``), so the
Python detection and the boot's shell one cannot drift apart.

- ``Dmi(field, *patterns)``: the DMI string ``/sys/class/dmi/id/<field>`` (stripped) matches;
  ``tokens=True``: one of its blank-separated words does;
- ``Cmdline(*patterns)``: the kernel command line (``tokens=True``: one of its words) matches;
- ``FileText(path, *patterns)``: a line of the file (stripped) matches; a path component ``*``
  stands for every directory there;
- ``Path(*paths, kind=...)``: the first path that ``exists`` / is a ``file``, ``dir``, ``socket``,
  ``nonempty`` directory or ``executable`` file; ``inside=(names)``: those names in the directories
  ``paths`` (what was found is the directory);
- ``DmiSame(a, b)``: two DMI strings are equal;
- ``Disk(*labels, fstypes=..., uuid=..., uuid_not=...)``: a block device of the machine holds such
  a filesystem (labels compared without case; UUIDs as blkid prints them);
- ``Setting(key, *patterns)``: ``datasource: {<Name>: {key: value}}`` is set (truthy) or, with
  patterns, ``str(value)`` matches one. Configuration: the shell generator never reads it (it hands
  any datasource configuration to ``cloudseed generator``);
- ``Listed(name)``: the configured ``datasource_list`` names ``name``;
- ``AllOf``, ``AnyOf``, ``Not``: combinations, evaluated left to right;
- ``Hatch(name, python=..., shell=...)``: what data cannot say, declared for both languages.

Patterns are shell-style globs: ``*`` any text, ``?`` one character, ``[aA]`` one of the listed
characters; every other character stands for itself. ``nocase=True`` ignores case. Every top-level
fact may name the ``stages`` it applies to (default: all of the datasource's) and its reason
``why``, where ``{value}`` is what the last fact that held found (a DMI string, a path, the
devices...) and ``{label}`` the label a ``Disk`` looked for. Paths are inside the target root
unless ``host=True`` (devices, /sys of the host). ``Fact.value(ctx, name)`` is what one fact finds,
for the fetch code that needs the same devices or files.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is not imported at boot
if TYPE_CHECKING:
    from typing import Any, Callable

    from cloudseed.agent.datasources import DatasourceContext

PATH_KINDS = ("exists", "file", "dir", "socket", "nonempty", "executable")


def glob_match(pattern: str, text: str) -> bool:
    """Does ``text`` match the shell-style ``pattern`` (``*``, ``?``, ``[chars]``) as a whole?"""
    if "*" not in pattern and "?" not in pattern and "[" not in pattern:
        return pattern == text
    p = t = 0
    star_p, star_t = -1, 0
    while t < len(text):
        if p < len(pattern):
            c = pattern[p]
            if c == "*":
                star_p, star_t = p, t
                p += 1
                continue
            if c == "[":
                end = pattern.index("]", p + 1)
                if text[t] in pattern[p + 1:end]:
                    p, t = end + 1, t + 1
                    continue
            elif c == "?" or c == text[t]:
                p, t = p + 1, t + 1
                continue
        if star_p < 0:
            return False
        star_t += 1  # let the last * take one more character
        p, t = star_p + 1, star_t
    return all(c == "*" for c in pattern[p:])


def anycase(text: str) -> str:
    """``text`` as a pattern matching it in any case (``ds`` -> ``[dD][sS]``)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.lower() != c.upper() else c for c in text)


def _matches(patterns: tuple[str, ...], value: str, nocase: bool) -> bool:
    if nocase:
        value = value.lower()
        return any(glob_match(p.lower(), value) for p in patterns)
    return any(glob_match(p, value) for p in patterns)


class Fact:
    """One condition about the machine (or its configuration). ``holds`` sets ``found[0]`` to what
    it found when it holds (leaves only; a ``Disk`` also ``found[1]``, the label it looked for, and
    keeps the machine's block devices and their labels in ``found[2]``: one scan for all the Disks
    of one detection); ``reason`` is the text ``why`` names."""

    __slots__ = ("why", "stages")
    configured = False  # depends on the configuration (a setting, the datasource list)
    disk = False  # probes block devices

    def __init__(self, why: str | None = None, stages: tuple[str, ...] | None = None):
        self.why = why
        self.stages = stages

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        raise NotImplementedError

    def default_why(self, name: str) -> str:
        return "{value}"

    def reason(self, name: str, found: list[Any]) -> str:
        return (self.why or self.default_why(name)).replace("{value}", found[0]).replace("{label}", found[1])

    def value(self, ctx: DatasourceContext | None, name: str) -> str | None:
        """What this fact finds for the datasource ``name`` (None: it does not hold)."""
        found = new_found()
        return found[0] if self.holds(ctx, name, found) else None

    def children(self) -> tuple[Fact, ...]:
        return ()


class Dmi(Fact):
    """``/sys/class/dmi/id/<field>`` (stripped), or one of its words (``tokens``), matches a pattern."""

    __slots__ = ("field", "patterns", "nocase", "tokens")

    def __init__(self, field: str, *patterns: str, nocase: bool = False, tokens: bool = False,
                 why: str | None = None, stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.field, self.patterns, self.nocase, self.tokens = field, patterns, nocase, tokens

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        return _text_holds(ctx.dmi(self.field), self, found)

    def default_why(self, name: str) -> str:
        return f"DMI {self.field} {'has' if self.tokens else 'is'} '{{value}}'"


class Cmdline(Fact):
    """The kernel command line, or one of its words (``tokens``), matches a pattern."""

    __slots__ = ("patterns", "nocase", "tokens")

    def __init__(self, *patterns: str, nocase: bool = False, tokens: bool = False, why: str | None = None,
                 stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.patterns, self.nocase, self.tokens = patterns, nocase, tokens

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        return _text_holds(ctx.cmdline or "", self, found)

    def default_why(self, name: str) -> str:
        return "kernel command line has {value}"


def _text_holds(text: str, fact: Dmi | Cmdline, found: list[str]) -> bool:
    for value in text.split() if fact.tokens else (text,):
        if _matches(fact.patterns, value, fact.nocase):
            found[0] = value
            return True
    return False


class FileText(Fact):
    """A line of the file ``path`` (stripped) matches a pattern; a component ``*`` is every entry there."""

    __slots__ = ("path", "patterns", "nocase", "host")

    def __init__(self, path: str, *patterns: str, nocase: bool = False, host: bool = False,
                 why: str | None = None, stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.path, self.patterns, self.nocase, self.host = path, patterns, nocase, host

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        for path in _expand(self.path, ctx, self.host):
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            for line in lines:
                if _matches(self.patterns, line.strip(), self.nocase):
                    found[0] = line.strip()
                    return True
        return False

    def default_why(self, name: str) -> str:
        return f"{self.path} says '{{value}}'"


def _expand(path: str, ctx: DatasourceContext, host: bool) -> list[str]:
    """Host paths for ``path`` (inside the root unless ``host``), its ``*`` component expanded."""
    head, star, tail = path.partition("/*/")
    top = head if host else ctx.root.path(head)
    if not star:
        return [top]
    try:
        return [f"{top}/{entry}/{tail}" for entry in sorted(os.listdir(top))]
    except OSError:
        return []


class Path(Fact):
    """The first of ``paths`` (or of the names ``inside`` them) that is of ``kind``; ``setting``:
    a datasource setting that, when set, replaces the path."""

    __slots__ = ("paths", "kind", "inside", "host", "setting")

    def __init__(self, *paths: str, kind: str = "exists", inside: tuple[str, ...] = (), host: bool = False,
                 setting: str | None = None, why: str | None = None, stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.paths, self.kind, self.inside, self.host, self.setting = paths, kind, inside, host, setting

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        paths = self.paths
        if self.setting:
            paths = (str(ctx.ds_cfg(name).get(self.setting) or paths[0]),)
        for path in paths:
            for inner in [f"{path}/{n}" for n in self.inside] or [path]:
                if self._is(ctx, inner):
                    found[0] = path
                    return True
        return False

    def _is(self, ctx: DatasourceContext, inner: str) -> bool:
        import stat

        kind = self.kind
        try:
            if kind == "socket":
                where = inner if self.host else ctx.root.path_nofollow(inner)
                return stat.S_ISSOCK(os.lstat(where).st_mode)
            where = inner if self.host else ctx.root.path(inner)
            if kind == "exists":
                return os.path.lexists(where) if not self.host else os.path.exists(where)
            if kind == "file":
                return os.path.isfile(where)
            if kind == "dir":
                return os.path.isdir(where)
            if kind == "nonempty":
                return os.path.isdir(where) and bool(os.listdir(where))
            if kind == "executable":
                return os.path.isfile(where) and os.access(where, os.X_OK)
        except OSError:
            return False
        raise ValueError(f"unknown path kind {kind!r}")

    def default_why(self, name: str) -> str:
        return "{value} exists"


def on_path(name: str, why: str | None = None) -> Path:
    """An executable ``name`` in a directory of the target's standard PATH (``TargetRoot.which``)."""
    from cloudseed.core.root import PATH_DIRS

    return Path(*(f"{d}/{name}" for d in PATH_DIRS), kind="executable", why=why or "{value} is installed")


class DmiSame(Fact):
    """Two DMI strings are equal (``nocase``: ignoring case)."""

    __slots__ = ("first", "second", "nocase")

    def __init__(self, first: str, second: str, nocase: bool = False, why: str | None = None,
                 stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.first, self.second, self.nocase = first, second, nocase

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        a, b = ctx.dmi(self.first), ctx.dmi(self.second)
        if self.nocase:
            a, b = a.lower(), b.lower()
        if a != b:
            return False
        found[0] = a
        return True

    def default_why(self, name: str) -> str:
        return f"DMI {self.first} and {self.second} are '{{value}}'"


class Disk(Fact):
    """A block device of the machine whose filesystem type is one of ``fstypes`` and whose label
    matches one of ``labels`` (patterns, without case), with a UUID matching ``uuid`` and not
    ``uuid_not`` when given; ``setting``: a datasource setting whose value (None: no label at
    all) replaces the labels. What it finds is the devices, comma-separated."""

    __slots__ = ("labels", "fstypes", "uuid", "uuid_not", "setting", "udev_hint")
    disk = True

    def __init__(self, *labels: str, fstypes: tuple[str, ...] = ("iso9660", "vfat"), uuid: str | None = None,
                 uuid_not: str | None = None, setting: str | None = None, udev_hint: bool = False,
                 why: str | None = None, stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.labels, self.fstypes, self.uuid, self.uuid_not = labels, fstypes, uuid, uuid_not
        # udev_hint: the initramfs's udev usually leaves a /dev/disk/by-label link to this one,
        # which the shell generator probes before all devices
        self.setting, self.udev_hint = setting, udev_hint

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        from cloudseed.agent import devices

        labels = self.labels
        if self.setting:
            section = ctx.ds_cfg(name)
            if self.setting in section:
                value = section[self.setting]
                labels = () if value is None else (str(value),)
        if not labels:
            return False
        if found[2] is None:
            found[2] = devices.probed_devices()
        if found[2]:
            hits = [device for device, probe in found[2] if self._type_and_label(device, probe, labels)]
        elif not any(c in label for label in labels for c in "*?["):
            hits = devices.find_devices_by_label(labels, self.fstypes)  # no sysfs: udev's links, blkid
        else:
            hits = []
        if self.uuid is not None or self.uuid_not is not None:
            hits = [d for d in hits if self._uuid_ok(devices.volume_id(d))]
        if not hits:
            return False
        found[0], found[1] = ", ".join(hits), labels[0].lower()
        return True

    def _type_and_label(self, device: str, probe: tuple[str, str] | None, labels: tuple[str, ...]) -> bool:
        if probe is None and "udf" in self.fstypes:
            from cloudseed.agent.devices import is_udf

            probe = ("udf", "") if is_udf(device) else None  # the label probe does not read UDF
        return probe is not None and probe[0] in self.fstypes and _matches(labels, probe[1], True)

    def _uuid_ok(self, uuid: str) -> bool:
        if self.uuid is not None and not glob_match(self.uuid.upper(), uuid.upper()):
            return False
        return self.uuid_not is None or not glob_match(self.uuid_not.upper(), uuid.upper())

    def default_why(self, name: str) -> str:
        return "filesystem labelled {label} on {value}"


class Setting(Fact):
    """``datasource: {<Name>: {key: value}}``: set (truthy), or ``str(value)`` matching a pattern."""

    __slots__ = ("key", "patterns", "nocase")
    configured = True

    def __init__(self, key: str, *patterns: str, nocase: bool = False, why: str | None = None,
                 stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.key, self.patterns, self.nocase = key, patterns, nocase

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        section = ctx.ds_cfg(name)
        if self.patterns:
            if self.key not in section or not _matches(self.patterns, str(section[self.key]), self.nocase):
                return False
        elif not section.get(self.key):
            return False
        found[0] = str(section[self.key])
        return True

    def default_why(self, name: str) -> str:
        if self.patterns:
            return f"datasource.{name}.{self.key} is '{{value}}'"
        return f"datasource.{name}.{self.key} is configured"


class Listed(Fact):
    """The configured ``datasource_list`` names ``name`` (as written)."""

    __slots__ = ("name",)
    configured = True

    def __init__(self, name: str, why: str | None = None, stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.name = name

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        return self.name in (ctx.cfg.get("datasource_list") or [])

    def default_why(self, name: str) -> str:
        return f"datasource_list names {self.name}"


class Hatch(Fact):
    """Detection that data cannot express, declared for both deciders: ``python(ctx)`` returns a
    false value, or what it found (a string, used as ``{value}``); ``shell`` is a POSIX shell
    condition (it may set ``value``), or None with ``shell_note`` saying why the shell needs none."""

    __slots__ = ("name", "python", "shell", "shell_note")

    def __init__(self, name: str, python: Callable[[DatasourceContext], Any], shell: str | None,
                 shell_note: str = "", why: str | None = None, stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.name, self.python, self.shell, self.shell_note = name, python, shell, shell_note

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        result = self.python(ctx)
        if not result:
            return False
        if isinstance(result, str):
            found[0] = result
        return True


class _Combination(Fact):
    __slots__ = ("facts",)

    def __init__(self, *facts: Fact, why: str | None = None, stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.facts = facts

    def children(self) -> tuple[Fact, ...]:
        return self.facts


class AllOf(_Combination):
    """Every one of ``facts`` holds (evaluated in order, stopping at the first that does not)."""

    __slots__ = ()

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        return all(f.holds(ctx, name, found) for f in self.facts)


class AnyOf(_Combination):
    """One of ``facts`` holds (the first that does)."""

    __slots__ = ()

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        return any(f.holds(ctx, name, found) for f in self.facts)


class Not(Fact):
    """``fact`` does not hold."""

    __slots__ = ("fact",)

    def __init__(self, fact: Fact, why: str | None = None, stages: tuple[str, ...] | None = None):
        super().__init__(why, stages)
        self.fact = fact

    def holds(self, ctx: DatasourceContext, name: str, found: list[str]) -> bool:
        return not self.fact.holds(ctx, name, found)

    def children(self) -> tuple[Fact, ...]:
        return (self.fact,)


def leaves(fact: Fact) -> list[Fact]:
    """The facts of a tree that are not combinations, in evaluation order."""
    kids = fact.children()
    return [leaf for kid in kids for leaf in leaves(kid)] if kids else [fact]


def configured(fact: Fact) -> bool:
    """Does ``fact`` depend on the configuration?"""
    return any(leaf.configured for leaf in leaves(fact))


def first_reason(cls: Any, ctx: DatasourceContext, machine_only: bool = False) -> str | None:
    """The reason of the first of ``cls.detection`` that holds in ``ctx.stage`` (None: none does);
    ``machine_only``: the facts about the machine, leaving out those about the configuration."""
    found = new_found()
    for fact in cls.detection:
        if fact.stages is not None and ctx.stage not in fact.stages:
            continue
        if machine_only and configured(fact):
            continue
        if fact.holds(ctx, cls.name, found):
            return fact.reason(cls.name, found)
    return None


def new_found() -> list[Any]:
    """What ``Fact.holds`` fills: [what it found, the label a Disk looked for, the probed devices]."""
    return ["", "", None]
