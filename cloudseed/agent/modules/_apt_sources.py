"""apt source entries: read and check one-line entries, write them as one-line or deb822.

One-line form (``sources.list``, ``*.list``)::

    deb [arch=amd64 signed-by=/etc/apt/keyrings/x.gpg] http://host/debian bookworm main

deb822 form (``*.sources``, Debian 12 ``debian.sources``, Ubuntu 24.04 ``ubuntu.sources``)::

    Types: deb
    URIs: http://host/debian
    Suites: bookworm
    Components: main
    Signed-By: /etc/apt/keyrings/x.gpg

A line is checked as apt would read it (type, well-formed ``[options]``, a URI with a scheme, a
suite, components unless the suite is an exact path ending in ``/``), so a typo is reported
with the line instead of breaking every later ``apt-get``. ``$VAR`` / ``${VAR}`` placeholders
(``$MIRROR``, ``$RELEASE``...) are replaced as cloud-init's basic templates do; an unknown one
is an error.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

TYPES = ("deb", "deb-src")
_VARIABLE = re.compile(r"\$\{([A-Za-z0-9_.]+)\}|\$([A-Za-z0-9_.]+)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# one-line option names whose deb822 field is not just the name capitalised
_FIELD_NAMES = {"arch": "Architectures", "lang": "Languages", "target": "Targets", "pdiffs": "PDiffs"}


class SourceError(Exception):
    """A source entry apt could not read; the message says what is wrong."""


def substitute(text: str, params: Mapping[str, str], where: str) -> str:
    """Replace ``$NAME`` / ``${NAME}`` with ``params``; an unknown name is a SourceError."""

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if name not in params or params[name] is None:
            known = ", ".join(f"${k}" for k in sorted(params) if k.isupper())
            raise SourceError(f"{where}: unknown variable ${name} (known: {known})")
        return str(params[name])

    return _VARIABLE.sub(value, text)


class Entry:
    """One source: a type, options, a URI, a suite and its components."""

    def __init__(self, kind: str, uri: str, suite: str, components: list[str],
                 options: list[tuple[str, str, str]] | None = None):
        self.kind = kind
        self.uri = uri
        self.suite = suite
        self.components = components
        self.options = options or []  # (name, operator "=" / "+=" / "-=", value)

    def option(self, name: str) -> str | None:
        for key, op, value in self.options:
            if key == name and op == "=":
                return value
        return None

    def set_option(self, name: str, value: str) -> None:
        self.options = [o for o in self.options if o[0] != name] + [(name, "=", value)]

    def one_line(self) -> str:
        parts = [self.kind]
        if self.options:
            parts.append("[" + " ".join(f"{k}{op}{v}" for k, op, v in self.options) + "]")
        parts += [self.uri, self.suite] + self.components
        return " ".join(parts)


def parse_line(line: str) -> Entry:
    """An active one-line entry; SourceError naming what apt would reject."""
    text = line.split("#", 1)[0].strip()
    if not text:
        raise SourceError("empty source line")
    kind, _, rest = text.partition(" ")
    kind = kind.strip()
    if kind not in TYPES:
        raise SourceError(f"unknown type {kind!r} (expected deb or deb-src) in {line.strip()!r}")
    rest = rest.strip()
    options: list[tuple[str, str, str]] = []
    if rest.startswith("["):
        end = rest.find("]")
        if end < 0:
            raise SourceError(f"'[' of the options is never closed in {line.strip()!r}")
        for word in rest[1:end].split():
            match = re.fullmatch(r"([A-Za-z][A-Za-z0-9-]*)([+-]?=)(\S+)", word)
            if not match:
                raise SourceError(f"option {word!r} is not name=value in {line.strip()!r}")
            options.append((match.group(1), match.group(2), match.group(3)))
        rest = rest[end + 1:].strip()
    words = rest.split()
    if not words:
        raise SourceError(f"no URI in {line.strip()!r}")
    uri = words[0]
    if not _SCHEME.match(uri) or uri.endswith(":"):
        raise SourceError(f"{uri!r} is not a URI (like http://host/path) in {line.strip()!r}")
    if len(words) < 2:
        raise SourceError(f"no suite after the URI in {line.strip()!r}")
    suite, components = words[1], words[2:]
    if suite.endswith("/") and components:
        raise SourceError(f"suite {suite!r} is an exact path (ends in '/') and takes no components "
                          f"in {line.strip()!r}")
    if not suite.endswith("/") and not components:
        raise SourceError(f"no component after suite {suite!r} (e.g. 'main') in {line.strip()!r}")
    return Entry(kind, uri, suite, components, options)


def active_lines(text: str) -> list[str]:
    """The lines of a one-line sources file that are entries (not comments or blank)."""
    return [line for line in text.splitlines() if line.split("#", 1)[0].strip()]


def check_text(text: str, where: str) -> list[Entry]:
    """Every active line of one-line sources ``text`` parsed; SourceError naming the line."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.split("#", 1)[0].strip():
            try:
                entries.append(parse_line(line))
            except SourceError as e:
                raise SourceError(f"{where} line {number}: {e}") from None
    return entries


def _suite_word(line: str) -> str | None:
    """The suite of a one-line entry (after the type, the options and the URI)."""
    words = line.split()
    index = 1
    if len(words) > 1 and words[1].startswith("["):
        while index < len(words) and not words[index].endswith("]"):
            index += 1
        index += 1
    index += 1  # the URI
    return words[index] if index < len(words) else None


def disable_suites(text: str, suites: list[str], marker: str = "# suite disabled by cloudseed: ") -> str:
    """Comment out the one-line entries whose suite is one of ``suites`` (already expanded)."""
    wanted = set(suites)
    lines = []
    for line in text.splitlines(True):
        if not line.lstrip().startswith("#") and line.strip() and _suite_word(line) in wanted:
            line = marker + line
        lines.append(line)
    return "".join(lines)


def field_name(option: str, op: str = "=") -> str:
    base = _FIELD_NAMES.get(option) or "-".join(part.capitalize() for part in option.split("-"))
    return base + {"+=": "-Add", "-=": "-Remove"}.get(op, "")


def to_deb822(entries: list[Entry]) -> str:
    """deb822 stanzas equivalent to ``entries`` (entries that differ only in type, suite or
    components are merged when the merged stanza means exactly the same set)."""
    # 1. components of the same (type, uri, options, suite) together
    by_suite: dict[tuple, Entry] = {}
    for entry in entries:
        key = (entry.kind, entry.uri, tuple(entry.options), entry.suite)
        if key in by_suite:
            merged = by_suite[key]
            merged.components += [c for c in entry.components if c not in merged.components]
        else:
            by_suite[key] = Entry(entry.kind, entry.uri, entry.suite, list(entry.components), list(entry.options))
    # 2. per (uri, options, components): types x suites, one stanza when that is the full product
    groups: dict[tuple, list[Entry]] = {}
    for entry in by_suite.values():
        groups.setdefault((entry.uri, tuple(entry.options), tuple(entry.components)), []).append(entry)
    stanzas = []
    for (uri, options, components), members in groups.items():
        kinds = list(dict.fromkeys(e.kind for e in members))
        suites = list(dict.fromkeys(e.suite for e in members))
        pairs = {(e.kind, e.suite) for e in members}
        if len(pairs) == len(kinds) * len(suites):
            splits = [(kinds, suites)]
        else:
            splits = [([k], [e.suite for e in members if e.kind == k]) for k in kinds]
        for split_kinds, split_suites in splits:
            fields = [("Types", " ".join(split_kinds)), ("URIs", uri), ("Suites", " ".join(split_suites))]
            if components:
                fields.append(("Components", " ".join(components)))
            fields += [(field_name(k, op), v.replace(",", " ")) for k, op, v in options]
            stanzas.append("".join(f"{name}: {value}\n" for name, value in fields))
    return "\n".join(stanzas)


def parse_deb822(text: str, where: str) -> list[dict[str, str]]:
    """The stanzas of a deb822 sources file as field dicts; SourceError for a stanza apt would reject."""
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    last = ""
    for number, line in enumerate(text.splitlines() + [""], 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                _check_stanza(current, f"{where} stanza {len(stanzas) + 1}")
                stanzas.append(current)
            current, last = {}, ""
            continue
        if line[0] in " \t":
            if not last:
                raise SourceError(f"{where} line {number}: continuation line without a field")
            current[last] += "\n" + line.strip()
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or " " in name.strip():
            raise SourceError(f"{where} line {number}: {line.strip()!r} is not 'Field: value'")
        last = name.strip()
        current[last] = value.strip()
    return stanzas


def _check_stanza(fields: dict[str, str], where: str) -> None:
    lower = {k.lower(): v for k, v in fields.items()}
    if lower.get("enabled", "yes").strip().lower() == "no":
        return
    for required in ("types", "uris", "suites"):
        if not lower.get(required, "").strip():
            raise SourceError(f"{where}: no {required.capitalize()} field")
    for kind in lower["types"].split():
        if kind not in TYPES:
            raise SourceError(f"{where}: unknown type {kind!r} in Types (deb, deb-src)")
    for uri in lower["uris"].split():
        if not _SCHEME.match(uri):
            raise SourceError(f"{where}: {uri!r} is not a URI")
    suites = lower["suites"].split()
    if any(not s.endswith("/") for s in suites) and not lower.get("components", "").strip():
        raise SourceError(f"{where}: no Components for suite(s) {' '.join(suites)}")


def disable_suites_deb822(text: str, suites: list[str]) -> str:
    """Take ``suites`` out of every stanza's Suites; a stanza left with none gets ``Enabled: no``."""
    wanted = set(suites)
    out, stanza = [], []

    def flush() -> None:
        if not stanza:
            return
        emptied = False
        for index, line in enumerate(stanza):
            name, sep, value = line.partition(":")
            if sep and name.strip().lower() == "suites":
                kept = [s for s in value.split() if s not in wanted]
                if len(kept) != len(value.split()):
                    stanza[index] = f"{name}: {' '.join(kept)}" if kept else line
                    emptied = not kept
        if emptied:
            stanza.append("Enabled: no")
        out.extend(stanza)
        stanza.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
            out.append(line)
        else:
            stanza.append(line)
    flush()
    return "\n".join(out) + "\n"


def disable_all_deb822(text: str, note: str) -> str:
    """The same stanzas, each marked ``Enabled: no`` (kept for reference, ignored by apt)."""
    out, stanza = [f"# {note}"], []

    def flush() -> None:
        if stanza:
            kept = [line for line in stanza if line.partition(":")[0].strip().lower() != "enabled"]
            out.extend(kept + ["Enabled: no"])
            stanza.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
            out.append(line)
        elif line.startswith("#"):
            out.append(line)
        else:
            stanza.append(line)
    flush()
    return "\n".join(out) + "\n"
