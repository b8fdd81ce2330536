"""Finding calls of named functions in the cloudseed package, however they were imported.

``calls_of(package, names)`` lists every call of ``subprocess.run``, ``yaml.safe_load``... in the
package's files, whether written ``subprocess.run(...)``, ``sp.run(...)`` after
``import subprocess as sp``, or ``run(...)`` after ``from subprocess import run``. A reference
that is not a call (``subprocess.DEVNULL``, ``yaml.YAMLError``) is not listed.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Call:
    source: str  # file, relative to the package's parent
    line: int
    name: str  # the dotted name called (``subprocess.run``)


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted name, from every import in the file (at any depth)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:                     # import a.b as c: c is a.b
                    names[alias.asname] = alias.name
                else:                                # import a.b: a is a
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def calls_in(path: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, dotted name) of each call in ``path`` of a function named in ``names``."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    aliases = _aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        written = _dotted(node.func)
        if not written:
            continue
        head, _, rest = written.partition(".")
        full = aliases.get(head, head) + (f".{rest}" if rest else "")
        if full in names:
            found.append((node.lineno, full))
    return found


def calls_of(package: str, names: set[str], inside: tuple[str, ...] = ("",),
             allowed: tuple[str, ...] = ()) -> list[Call]:
    """Calls of ``names`` in the files under ``package``'s subdirectories ``inside`` (all by default),
    except the files (relative to the package, ``core/root.py``) or directories (``core/``) ``allowed``."""
    parent = os.path.dirname(package)
    found = []
    for sub in inside:
        for directory, _dirs, files in os.walk(os.path.join(package, sub)):
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(directory, name)
                rel = os.path.relpath(path, package).replace(os.sep, "/")
                if any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in allowed):
                    continue
                found += [Call(os.path.relpath(path, parent), line, called) for line, called in calls_in(path, names)]
    return sorted(found, key=lambda c: (c.source, c.line))
