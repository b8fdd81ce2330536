"""The tests are one importable package: helpers imported as ``tests.<area>.<helper>``, never by
editing ``sys.path``, and no test file imports another (what two share lives in a helper or a
conftest.py). The scripts that run outside pytest may put the checkout on ``sys.path``, saying why
on the line before."""

from __future__ import annotations

import ast
import os

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sources():
    for directory, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                with open(path) as handle:
                    yield os.path.relpath(path, os.path.dirname(TESTS)), handle.read()


def test_every_directory_with_python_files_is_a_package():
    missing = [os.path.relpath(d, os.path.dirname(TESTS)) for d, dirs, files in os.walk(TESTS)
               if "__pycache__" not in d and any(f.endswith(".py") for f in files) and "__init__.py" not in files]
    assert not missing, f"directories under tests/ without __init__.py: {missing}"


def test_no_sys_path_edit_without_its_reason():
    unexplained = []
    for path, text in _sources():
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.path.insert", "sys.path.append"):
                line, before = lines[node.lineno - 1], lines[node.lineno - 2] if node.lineno > 1 else ""
                if "#" not in line and not before.lstrip().startswith("#"):
                    unexplained.append(f"{path}:{node.lineno}")
    assert not unexplained, f"sys.path edited without a comment saying why: {unexplained}"


def test_no_test_file_imports_another():
    found = []
    for path, text in _sources():
        for node in ast.walk(ast.parse(text)):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            if any(name.rsplit(".", 1)[-1].startswith("test_") for name in names):
                found.append(f"{path}:{node.lineno}")
    assert not found, f"imports of test files: {found}"
