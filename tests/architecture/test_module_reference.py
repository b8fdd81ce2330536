"""docs/modules.md is what the modules declare: regenerated, it must not change."""

from __future__ import annotations

import os
import subprocess
import sys

from cloudseed.agent.config.module_reference import COMMAND, describe_type, key_rows, reference
from cloudseed.agent.modules import all_module_names, load_module

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(PROJECT, "docs", "modules.md")


def test_committed_reference_is_up_to_date():
    with open(DOCS, encoding="utf-8") as handle:
        committed = handle.read()
    fresh = reference()
    if committed != fresh:
        old, new = _sections(committed), _sections(fresh)
        changes = [f"new module {n}" for n in new if n not in old] + \
                  [f"module {n} is gone" for n in old if n not in new] + \
                  [f"module {n} changed" for n in new if n in old and old[n] != new[n]]
        raise AssertionError(f"docs/modules.md is stale ({'; '.join(changes) or 'header changed'}); "
                             f"regenerate it with:\n    {COMMAND}")


def _sections(text: str) -> dict[str, str]:
    parts = text.split("\n## ")[1:]
    return {part.split("\n", 1)[0]: part for part in parts}


def test_every_module_key_and_example_is_in_the_reference():
    text = reference()
    for name in all_module_names():
        spec, _handle = load_module(name)
        assert f"\n## {spec.name}\n" in text
        for path, _schema in key_rows((spec.schema or {}).get("properties") or {}):
            assert f"| `{path.replace('|', chr(92) + '|')}` |" in text, f"{name}: key {path} missing"
        for example in spec.examples:
            assert example.rstrip("\n").split("\n", 1)[-1] in text, f"{name}: an example is missing"


def test_the_documented_command_writes_the_reference(tmp_path):
    out = subprocess.run([sys.executable, "-m", "cloudseed.agent.config.module_reference"], cwd=PROJECT,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out == reference()
    assert COMMAND.endswith("-m cloudseed.agent.config.module_reference > docs/modules.md")


def test_type_descriptions():
    assert describe_type({"type": "array", "items": {"type": "string"}}) == "array of string"
    assert describe_type({"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["a", "b"]}]}) == \
        'boolean | string ("a", "b")'
    assert describe_type({"enum": [True, False, "noblock"]}) == 'true, false, "noblock"'
    # constraint-only alternatives (required: [...]) do not hide the declared type
    assert describe_type({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}) == "object"
    assert describe_type({"type": "string", "pattern": "^[0-9]+$"}) == "string matching `^[0-9]+$`"
    items = {"type": "object", "properties": {"b": {"type": "integer"}}}
    rows = dict(key_rows({"a": {"type": "array", "items": items}}))
    assert list(rows) == ["a", "a[].b"]
