"""What ``pip install cloudseed`` gives: every library the code imports is a dependency, the boot path
imports none of the heavier ones, and a verb whose library is missing says so in one line.

The missing-library cases run the real CLI in a subprocess whose import system refuses the library
(an import hook), as on a machine where it was never installed.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys

import pytest

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(PROJECT, "cloudseed")

# import name -> distribution, where they differ
DISTRIBUTIONS = {"yaml": "pyyaml"}
OPTIONAL = {"psycopg": "postgres"}  # import name -> the extra that provides it
HEAVY = ("jinja2", "pycdlib", "pyfatfs", "fs", "psycopg")

_HIDE = r"""
import sys
hidden = set(sys.argv[1].split(","))


class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Refuse())
from cloudseed.cli import main

sys.exit(main(sys.argv[2:]))
"""


def _imports() -> dict[str, set[str]]:
    """Top-level module name -> files of the package importing it (function-level imports too)."""
    found: dict[str, set[str]] = {}
    for folder, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for full in names:
                    top = full.split(".")[0]
                    if os.path.exists(os.path.join(folder, f"{top}.py")):
                        continue  # a sibling of a script folder run as itself (the lab's guest helper)
                    found.setdefault(top, set()).add(os.path.relpath(path, PROJECT))
    return found


def _pyproject() -> tuple[list[str], dict[str, list[str]]]:
    import tomllib

    with open(os.path.join(PROJECT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    return project["dependencies"], project.get("optional-dependencies", {})


def _distribution(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0].lower()


def test_every_third_party_import_is_a_main_dependency_or_the_postgres_extra():
    main, extras = _pyproject()
    mains = {_distribution(r) for r in main}
    third_party = {name: files for name, files in _imports().items()
                   if name not in sys.stdlib_module_names and name != "cloudseed"}
    for name, files in third_party.items():
        if name in OPTIONAL:
            assert any(_distribution(r) == name for r in extras[OPTIONAL[name]]), (name, files)
        else:
            assert DISTRIBUTIONS.get(name, name) in mains, \
                f"{name} is imported by {sorted(files)} but is not a main dependency in pyproject.toml"
    assert {"pyyaml", "jinja2", "pycdlib", "pyfatfs"} <= mains
    # the one optional extra is the only extra a user installs (dev is for working on cloudseed)
    assert set(extras) == {"postgres", "dev"}
    assert "jsonschema" not in third_party  # the validator is cloudseed's own (cloudseed/agent/config/schema.py)


def test_the_boot_path_imports_no_heavier_library():
    code = ("import sys, cloudseed.cli, cloudseed.agent.boot.stages, cloudseed.agent.config.schema;"
            "import cloudseed.agent.userdata.process;"
            "from cloudseed.agent.config.schema import validate_config;"
            "validate_config({'runcmd': ['true'], 'landscape': {}});"
            f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def _run_hidden(hidden: str, *args: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _HIDE, hidden, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60, env=dict(os.environ, PYTHONPATH=PROJECT))


CASES = [
    ("jinja2", ["query", "--instance-data", "{idata}",
                "--format", "{{% if v1 %}}{{{{ v1.instance_id }}}}{{% endif %}}"], "pip install Jinja2"),
    ("jinja2", ["userdata", "show", "--instance-data", "{idata}", "{template}"], "Jinja2"),
    ("pycdlib", ["seed", "build", "--kind", "nocloud", "--fs", "iso9660", "-o", "{out}", "--instance-id", "i-1"],
     "pip install pycdlib"),
    ("pyfatfs", ["seed", "build", "--kind", "nocloud", "--fs", "vfat", "-o", "{out}", "--instance-id", "i-1"],
     "pip install pyfatfs"),
    ("pyfatfs", ["seed", "build", "--kind", "configdrive", "--fs", "iso9660", "-o", "{out}", "--instance-id", "i-1"],
     "pip install pyfatfs"),
    ("psycopg", ["instances", "--db", "postgresql://127.0.0.1:1/none", "list"], "cloudseed[postgres]"),
]


@pytest.mark.parametrize("hidden,args,hint", CASES, ids=[f"{c[0]}-{c[1][0]}-{i}" for i, c in enumerate(CASES)])
def test_a_missing_library_is_one_clear_line(tmp_path, hidden, args, hint):
    idata = tmp_path / "instance-data.json"
    idata.write_text(json.dumps({"v1": {"instance_id": "i-1"}}))
    template = tmp_path / "user-data"
    template.write_text("## template: jinja\n#cloud-config\nhostname: {{ v1.instance_id }}\n")
    out = tmp_path / "seed.img"
    argv = [a.format(idata=idata, template=template, out=out) for a in args]
    proc = _run_hidden(hidden, *argv, cwd=str(tmp_path))
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if hint in line]
    assert len(lines) == 1, text
    assert not out.exists()  # nothing half-written
    # the same command with the library present works (the hook is not what fails)
    if hidden != "psycopg":
        assert _run_hidden("nothing", *argv, cwd=str(tmp_path)).returncode == 0
