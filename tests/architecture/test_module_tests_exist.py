"""Module tests mirror the modules: cloudseed/agent/modules/<name>.py has tests/agent/modules/test_<name>.py."""

from __future__ import annotations

import ast
import os

from cloudseed.agent.modules import all_module_names

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = os.path.join(PROJECT, "tests", "agent", "modules")


def test_every_module_has_its_test_file():
    missing = [name for name in all_module_names() if not os.path.isfile(os.path.join(TESTS, f"test_{name}.py"))]
    assert not missing, "modules without tests/agent/modules/test_<module>.py: " + ", ".join(missing)


def test_every_module_test_file_has_tests():
    empty = []
    for name in all_module_names():
        path = os.path.join(TESTS, f"test_{name}.py")
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        if not any(isinstance(n, ast.FunctionDef) and n.name.startswith("test_") for n in tree.body):
            empty.append(f"test_{name}.py")
    assert not empty, "module test files without a test function: " + ", ".join(empty)
