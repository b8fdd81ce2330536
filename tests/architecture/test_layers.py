"""The package keeps its layers: commands -> lab -> provider | agent -> network -> core."""

from __future__ import annotations

import os
import sys
import textwrap

sys.path.insert(0, os.path.dirname(__file__))

import layers  # noqa: E402  (after the sys.path line)

import cloudseed  # noqa: E402

PACKAGE = os.path.dirname(os.path.abspath(cloudseed.__file__))


def test_cloudseed_keeps_its_layers():
    found = layers.violations(PACKAGE)
    assert not found, "imports against the layering rule:\n" + "\n".join(
        f"  {a.source}:{a.line}: {a.importer} imports {a.imported} ({a.layer})" for a in found)


def _package(tmp_path, files: dict[str, str]) -> str:
    top = tmp_path / "cloudseed"
    for rel, text in files.items():
        path = top / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for directory in [top, *[p for p in top.rglob("*") if p.is_dir()]]:
        (directory / "__init__.py").touch(exist_ok=True)
    return str(top)


def test_the_check_finds_an_upward_import_inside_a_function(tmp_path):
    package = _package(tmp_path, {
        "core/root.py": "def f():\n    from cloudseed.agent.stages import Agent\n",
        "network/apply.py": "from cloudseed.core.root import TargetRoot\n",
    })
    found = layers.violations(package)
    assert [(a.source, a.line, a.imported) for a in found] == [
        ("cloudseed/core/root.py", 2, "cloudseed.agent.stages")]


def test_the_check_finds_peers_mixing_and_relative_and_dynamic_imports(tmp_path):
    package = _package(tmp_path, {
        "agent/stages.py": "from ..provider.registry import record\n",
        "provider/server/app.py": "import importlib\nimportlib.import_module('cloudseed.agent.modules')\n",
        "network/model.py": "from cloudseed import lab\n",
        "lab/vm.py": "from cloudseed.provider import seeds\nfrom cloudseed.agent import state\n",
        "commands/lab.py": "from cloudseed.lab import vm\n",
    })
    found = {(a.source, a.imported) for a in layers.violations(package)}
    assert found == {
        ("cloudseed/agent/stages.py", "cloudseed.provider.registry"),
        ("cloudseed/provider/server/app.py", "cloudseed.agent.modules"),
        ("cloudseed/network/model.py", "cloudseed.lab"),
    }
