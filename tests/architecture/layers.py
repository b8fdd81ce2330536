"""The import graph of the cloudseed package and its layering rule.

Layers, top to bottom: commands (and the CLI entry) -> lab -> provider | agent -> network -> core.
A module may import its own layer or any layer below it; ``provider`` and ``agent`` are peers
that may not import each other. Imports inside functions count (they are where a lazy import
would hide an upward arrow). ``cloudseed`` itself (the version) is importable from anywhere.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

RANKS = {"core": 0, "network": 1, "agent": 2, "provider": 2, "lab": 3, "commands": 4}
PEERS_THAT_MAY_NOT_MIX = {frozenset({"agent", "provider"})}


@dataclass(frozen=True)
class Arrow:
    source: str  # file, relative to the package's parent
    line: int
    importer: str  # layer of the file
    imported: str  # dotted module name imported
    layer: str  # layer of the imported module


def layer_of(dotted: str) -> str | None:
    """The layer of a dotted module name inside cloudseed (None for the package root or outside)."""
    parts = dotted.split(".")
    if parts[0] != "cloudseed" or len(parts) < 2:
        return None
    head = parts[1]
    if head in ("cli", "__main__"):
        return "commands"
    return head if head in RANKS else None


def module_name(package_parent: str, path: str) -> str:
    rel = os.path.relpath(path, package_parent)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def imports_of(path: str, dotted: str) -> list[tuple[int, str]]:
    """Every (line, module) ``path`` imports, at any depth, relative imports resolved."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    package = dotted if path.endswith("__init__.py") else dotted.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # "from cloudseed import agent" names a subpackage
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names if target == "cloudseed"]
        elif _is_literal_import_module(node):
            found.append((node.lineno, node.args[0].value))
    return found


def _is_literal_import_module(node: ast.AST) -> bool:
    """``importlib.import_module("cloudseed....")`` with a literal name."""
    if not isinstance(node, ast.Call) or getattr(node.func, "attr", getattr(node.func, "id", "")) != "import_module":
        return False
    return bool(node.args) and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)


def violations(package_dir: str) -> list[Arrow]:
    """Every import in the package at ``package_dir`` that breaks the layering rule."""
    parent = os.path.dirname(os.path.abspath(package_dir))
    bad: list[Arrow] = []
    for top, _dirs, files in os.walk(package_dir):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(top, name)
            dotted = module_name(parent, path)
            mine = layer_of(dotted)
            if mine is None:
                continue
            for line, imported in imports_of(path, dotted):
                theirs = layer_of(imported)
                if theirs is None or theirs == mine:
                    continue
                upward = RANKS[theirs] > RANKS[mine]
                sideways = frozenset({mine, theirs}) in PEERS_THAT_MAY_NOT_MIX
                if upward or sideways:
                    bad.append(Arrow(os.path.relpath(path, parent), line, mine, imported, theirs))
    return sorted(bad, key=lambda a: (a.source, a.line))
