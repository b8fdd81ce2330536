"""The import graph of the cloudseed package and its layering rule.

Layers, top to bottom: commands (and the CLI entry) -> lab -> provider | agent -> network | clouds
-> core. A module may import its own layer or any layer below it; ``provider`` and ``agent`` are
peers that may not import each other, nor may ``network`` and ``clouds`` (each cloud's wire
contract, read by the agent and the provider alike). Imports inside functions count (they are
where a lazy import would hide an upward arrow). ``cloudseed`` itself (the version) is importable from anywhere.

Two more structure rules: no import cycles (``cycles``: modules importing one another, imports
inside functions included, ``if TYPE_CHECKING:`` blocks left out since they never run), and no
folder with more than 20 files at its top level (``crowded_folders``) except the plugin folders.
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass

RANKS = {"core": 0, "network": 1, "clouds": 1, "agent": 2, "provider": 2, "lab": 3, "commands": 4}
PEERS_THAT_MAY_NOT_MIX = {frozenset({"agent", "provider"}), frozenset({"network", "clouds"})}


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


@functools.cache
def parsed(path: str) -> ast.Module:
    """The syntax tree of ``path``, read once per test run (each check walks every file)."""
    with open(path, encoding="utf-8") as handle:
        return ast.parse(handle.read(), filename=path)


def imports_of(path: str, dotted: str) -> list[tuple[int, str]]:
    """Every (line, module) ``path`` imports, at any depth, relative imports resolved."""
    tree = parsed(path)
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


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` that can run: the bodies of ``if TYPE_CHECKING:`` are left out (they
    are read by type checkers only, so an import there cannot take part in an import cycle)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            test = getattr(child, "test", None)
            if isinstance(child, ast.If) and getattr(test, "id", getattr(test, "attr", "")) == "TYPE_CHECKING":
                todo += child.orelse
            else:
                todo.append(child)


def _modules_in(package_dir: str) -> dict[str, str]:
    parent = os.path.dirname(os.path.abspath(package_dir))
    found = {}
    for top, _dirs, files in os.walk(package_dir):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(top, name)
                found[module_name(parent, path)] = path
    return found


def import_graph(package_dir: str) -> dict[str, list[tuple[int, str]]]:
    """For each module of the package, the (line, module) pairs it imports when it runs, at any depth
    (module level or inside functions), resolved to modules of the package: ``from a import b``
    names ``a.b`` when that is a module, else ``a``."""
    modules = _modules_in(package_dir)
    graph: dict[str, list[tuple[int, str]]] = {}
    for dotted, path in modules.items():
        tree = parsed(path)
        package = dotted if path.endswith("__init__.py") else dotted.rpartition(".")[0]
        edges = []
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Import):
                edges += [(node.lineno, alias.name) for alias in node.names if alias.name in modules]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    target = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    if f"{target}.{alias.name}" in modules:
                        edges.append((node.lineno, f"{target}.{alias.name}"))
                    elif target in modules:
                        edges.append((node.lineno, target))
            elif _is_literal_import_module(node) and node.args[0].value in modules:
                edges.append((node.lineno, node.args[0].value))
        graph[dotted] = sorted({edge for edge in edges if edge[1] != dotted})
    return graph


@dataclass(frozen=True)
class Cycle:
    modules: tuple[str, ...]  # the modules that import each other, round and round
    edges: tuple[tuple[str, int, str], ...]  # (importer, line, imported) inside the cycle


def cycles(package_dir: str) -> list[Cycle]:
    """Every group of modules that import one another (strongly connected, two or more modules)."""
    graph = import_graph(package_dir)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        # Tarjan's algorithm, iteratively: (module, position in its edge list)
        work = [(start, 0)]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, position = work[-1]
            edges = graph[module]
            if position < len(edges):
                work[-1] = (module, position + 1)
                target = edges[position][1]
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, 0))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    found = []
    for group in sorted(groups):
        inside = set(group)
        edges = tuple((m, line, t) for m in group for line, t in graph[m] if t in inside)
        found.append(Cycle(tuple(group), edges))
    return found


# Folders that hold one file per plugin, registered by declaration: they grow with the product.
PLUGIN_FOLDERS = {"agent/modules", "agent/datasources", "commands", "clouds", "provider/instance_data",
                  "provider/server/apis"}
MAX_FILES_PER_FOLDER = 20


def crowded_folders(package_dir: str, limit: int = MAX_FILES_PER_FOLDER) -> list[tuple[str, int]]:
    """(folder, files) for every folder of the package with more than ``limit`` files at its top
    level, the plugin folders left out."""
    crowded = []
    for top, dirs, files in os.walk(package_dir):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        folder = os.path.relpath(top, package_dir).replace(os.sep, "/")
        if folder in PLUGIN_FOLDERS:
            continue
        if len(files) > limit:
            crowded.append((folder, len(files)))
    return sorted(crowded)
