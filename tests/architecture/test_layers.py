"""The package keeps its layers: commands -> lab -> provider | agent -> network | clouds -> core."""

from __future__ import annotations

import os
import textwrap

import cloudseed
from tests.architecture import layers

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


def test_cloudseed_has_no_import_cycles():
    found = layers.cycles(PACKAGE)
    assert not found, "modules that import one another:\n" + "\n".join(
        "  " + " <-> ".join(c.modules) + "\n" + "\n".join(f"    {a} line {line} imports {b}" for a, line, b in c.edges)
        for c in found)


def test_no_folder_is_crowded():
    crowded = layers.crowded_folders(PACKAGE)
    assert not crowded, f"folders with more than {layers.MAX_FILES_PER_FOLDER} files at their top level: {crowded}"


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import(tmp_path):
    package = _package(tmp_path, {
        "provider/registry/record.py": "from cloudseed.provider.registry import fields\n",
        "provider/registry/fields.py": "def check():\n    from cloudseed.provider.registry.record import Error\n",
        "provider/server/app.py": "from cloudseed.provider.registry import record\n",
    })
    found = layers.cycles(package)
    assert [c.modules for c in found] == [("cloudseed.provider.registry.fields", "cloudseed.provider.registry.record")]
    assert found[0].edges == (("cloudseed.provider.registry.fields", 2, "cloudseed.provider.registry.record"),
                              ("cloudseed.provider.registry.record", 1, "cloudseed.provider.registry.fields"))


def test_the_cycle_check_follows_a_package_and_its_submodules_but_not_type_checking_imports(tmp_path):
    package = _package(tmp_path, {
        "network/__init__.py": "def parse():\n    from cloudseed.network.parsers import parse\n",
        "network/parsers.py": "from cloudseed.network import Error\n",
        "agent/helper.py": "if TYPE_CHECKING:\n    from cloudseed.agent.modules import Context\n",
        "agent/modules/__init__.py": "from cloudseed.agent import helper\n",
    })
    assert [c.modules for c in layers.cycles(package)] == [("cloudseed.network", "cloudseed.network.parsers")]


def test_the_folder_check_counts_files_but_not_plugins(tmp_path):
    package = _package(tmp_path, {
        **{f"agent/helper_{i}.py": "" for i in range(20)},  # 21 with __init__.py
        **{f"agent/modules/module_{i}.py": "" for i in range(30)},  # a plugin folder
        **{f"provider/server/apis/cloud_{i}.py": "" for i in range(30)},  # server APIs are plugins
        **{f"provider/server/part_{i}.py": "" for i in range(19)},  # 20 with __init__.py
        **{f"provider/server/engine/part_{i}.py": "" for i in range(20)},  # 21: a package of a plugin's parent
    })
    assert layers.crowded_folders(package) == [("agent", 21), ("provider/server/engine", 21)]
