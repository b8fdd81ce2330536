"""Every plugin of every kind keeps its contract: modules, datasources, renderers, distros, CLI verbs.

Each kind's contract (``typing.Protocol``s plus the rules a type cannot say) lives beside its
registry in a ``_contract.py``; ``protocol_check.py`` (here, not in the package: nothing that runs
needs it) checks the Protocols. Every file of every plugin directory is imported and checked;
a failure lists every bad plugin by file, not just the first.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import types

import pytest

import cloudseed
from cloudseed.agent.datasources import _contract as datasource_contract
from cloudseed.agent.distros import _contract as distro_contract
from cloudseed.agent.modules import ModuleSpec
from cloudseed.agent.modules import _contract as module_contract
from cloudseed.commands import _contract as verb_contract
from cloudseed.network.renderers import _contract as renderer_contract
from tests.architecture.protocol_check import contract_problems

PACKAGE = os.path.dirname(os.path.abspath(cloudseed.__file__))
KINDS = {  # directory under the package -> the dotted package
    "agent/modules": "cloudseed.agent.modules",
    "agent/datasources": "cloudseed.agent.datasources",
    "network/renderers": "cloudseed.network.renderers",
    "agent/distros": "cloudseed.agent.distros",
    "commands": "cloudseed.commands",
}


def plugin_files(directory: str) -> list[str]:
    """The plugin files of a directory: every ``.py`` but the package and private helpers."""
    here = os.path.join(PACKAGE, directory)
    return sorted(n[:-3] for n in os.listdir(here) if n.endswith(".py") and not n.startswith("_"))


def load_all(directory: str) -> tuple[dict[str, types.ModuleType], dict[str, list[str]]]:
    loaded, bad = {}, {}
    for stem in plugin_files(directory):
        try:
            loaded[stem] = importlib.import_module(f"{KINDS[directory]}.{stem}")
        except Exception as e:  # a plugin that cannot even be imported is reported like the others
            bad[stem] = [f"cannot be imported: {type(e).__name__}: {e}"]
    return loaded, bad


def report(directory: str, bad: dict[str, list[str]]) -> str:
    lines = [f"{len(bad)} plugin file(s) in cloudseed/{directory} break their contract:"]
    for stem, found in sorted(bad.items()):
        lines.append(f"  cloudseed/{directory}/{stem}.py:")
        lines += [f"    - {problem}" for problem in found]
    return "\n".join(lines)


def check_all(directory: str, check) -> None:
    loaded, bad = load_all(directory)
    for stem, plugin in loaded.items():
        found = check(plugin, stem)
        if found:
            bad[stem] = found
    assert not bad, report(directory, bad)


def test_modules_keep_their_contract():
    from cloudseed.agent.config.schema import build_module_schema
    from cloudseed.agent.distros import OTHER_SYSTEMS, distro_names
    from cloudseed.agent.distros import families as os_id_families

    known = set(build_module_schema()["properties"])
    # a module names families, os-release IDs a distro file serves, or a declared other system
    families = set(distro_names()) | set(os_id_families()) | set(OTHER_SYSTEMS)
    check_all("agent/modules", lambda plugin, stem: contract_problems(module_contract, plugin, stem, known, families))


def test_datasources_keep_their_contract():
    check_all("agent/datasources", lambda plugin, stem: contract_problems(datasource_contract, plugin, stem))
    loaded, _bad = load_all("agent/datasources")
    fallbacks = [stem for stem, m in loaded.items() if getattr(getattr(m, "DATASOURCE", None), "fallback", False)]
    assert len(fallbacks) == 1, f"exactly one fallback datasource, found {fallbacks}"


def test_detection_names_no_datasource():
    """detect.py decides from what each datasource declares: no datasource is special-cased there."""
    loaded, _bad = load_all("agent/datasources")
    classes = [m.DATASOURCE for m in loaded.values() if hasattr(m, "DATASOURCE") and not m.DATASOURCE.fallback]
    words = {c.name.lower() for c in classes} | {c.__module__.rsplit(".", 1)[1] for c in classes}
    path = os.path.join(PACKAGE, "agent", "boot", "detect.py")
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    named = []
    for node in ast.walk(tree):
        text = ""
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
        elif isinstance(node, ast.ImportFrom):
            text = node.module or ""
        elif isinstance(node, (ast.Name, ast.Attribute)):
            text = getattr(node, "id", "") or getattr(node, "attr", "")
        named += [f"line {node.lineno}: {word}" for word in words if word in text.lower()]
    assert not named, f"detect.py names datasources: {named}"


def test_renderers_keep_their_contract():
    check_all("network/renderers", lambda plugin, stem: contract_problems(renderer_contract, plugin, stem))


def test_distros_keep_their_contract():
    from cloudseed.network.renderers import names

    renderers = names()
    check_all("agent/distros", lambda plugin, stem: contract_problems(distro_contract, plugin, stem, renderers))
    loaded, _bad = load_all("agent/distros")
    twice = distro_contract.claimed_twice({stem: m.DISTRO for stem, m in loaded.items() if hasattr(m, "DISTRO")})
    assert not twice, twice


def test_verbs_keep_their_contract():
    from cloudseed.cli import verb_names

    check_all("commands", lambda plugin, stem: contract_problems(verb_contract, plugin, stem))
    assert verb_names() == plugin_files("commands")


# ------------------------------------------------------------------ the checks can fail
def _module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


def test_a_bad_module_is_reported_with_every_problem():
    spec = ModuleSpec("other_name", "sometime", frequency="hourly", activate_by=("nokey",),
                      distros=("plan9",), schema={"properties": {"key": {"type": "string"}}}, title="")
    spec.activate_by = ["key"]  # a list where a tuple is declared
    plugin = _module("bad", MODULE=spec, handle=lambda ctx, extra: None)
    found = contract_problems(module_contract, plugin, "bad")
    assert any("handle" in p and "extra" in p for p in found), found
    assert any("activate_by" in p and "tuple" in p for p in found), found
    spec.activate_by = ("nokey",)
    plugin.handle = lambda ctx: None
    found = contract_problems(module_contract, plugin, "bad", known_keys={"key"}, families={"debian"})
    expected = ["MODULE.name is 'other_name'", "MODULE.stage 'sometime'", "MODULE.frequency 'hourly'",
                "MODULE.title is empty", "'nokey', which no schema declares", "'plan9', which no distro",
                "MODULE.examples is empty"]
    for text in expected:
        assert any(text in p for p in found), (text, found)
    spec.examples = ("- just a list\n", "a: [unclosed\n")
    found = contract_problems(module_contract, plugin, "bad")
    assert any("examples[0]: not a cloud-config mapping" in p for p in found), found
    assert any("examples[1]: not YAML" in p for p in found), found


def test_a_bad_datasource_is_reported():
    from cloudseed.agent.datasources import Datasource

    class Twice(Datasource):
        name = "Twice"
        stages = ("local", "cloud")

        @classmethod
        def detect(cls, ctx):
            return True

        def fetch(self, extra):
            return True

    found = contract_problems(datasource_contract, _module("twice", DATASOURCE=Twice), "twice")
    assert any("fetch" in p and "extra" in p for p in found), found
    Twice.fetch = lambda self: True
    found = contract_problems(datasource_contract, _module("twice", DATASOURCE=Twice), "twice")
    for text in ("does not lead back", "stages", "overrides detect()", "declares no detection"):
        assert any(text in p for p in found), (text, found)
    assert datasource_contract.problems(_module("x", DATASOURCE=dict), "x") == \
        ["DATASOURCE is <class 'dict'>, not a Datasource subclass"]


def test_detection_the_shell_cannot_take_is_reported():
    """What the derived Python detection and the shell compiler could not both honour is refused:
    patterns beyond ``*``/``?``/``[chars]``, a Disk probed before another fact or under Not, two
    Disks that one device must satisfy together, a combination or a hatch without its reason, a
    hatch without a shell side or a note why it needs none, stages the datasource does not run in."""
    from cloudseed.agent.datasources import Datasource
    from cloudseed.agent.datasources._facts import AllOf, Cmdline, Disk, Dmi, Hatch, Not, Path

    class Odd(Datasource):
        name = "Odd"
        stages = ("local",)
        detection = (
            Dmi("sys_vendor", "[!a]x", "a\\b", "[a-z]"),
            AllOf(Disk("cidata"), Path("/x")),
            AllOf(Path("/x"), Not(Disk("cidata")), why="w"),
            AllOf(Disk("cidata"), Disk("config-2"), why="w"),
            AllOf(Path("/x"), Cmdline("y")),
            Hatch("odd", python=lambda ctx: True, shell=None),
            Hatch("odd two", python=lambda ctx: True, shell="true"),
            Dmi("sys_vendor", "x", stages=("network",)),
            Disk("cid*", udev_hint=True),
            Path("relative"),
        )

        def fetch(self):
            return False

    found = datasource_contract.detection_problems(Odd)
    for text in ("'[!a]x'", "'a\\\\b'", "'[a-z]'", "detection[2]: its Disk facts must come after",
                 "detection[3]: Not over a Disk", "detection[4]: an AllOf of two Disk",
                 "detection[5]: a combination needs its reason", "hatch odd has no shell side",
                 "'odd two' is not an identifier", "hatch odd two needs its reason",
                 "detection[8]: stages", "detection[9]: udev_hint", "detection[10]: Path paths are absolute"):
        assert any(text in p for p in found), (text, found)


def test_a_bad_renderer_distro_and_verb_are_reported():
    fancy = _module("fancy", NAME="fancy", DESCRIPTION="x", OWNED="/etc/x", available=lambda: True,
                    render=lambda model: [])
    found = contract_problems(renderer_contract, fancy, "fancy")
    assert any(p.startswith("OWNED") for p in found), found
    assert any("available" in p for p in found) and any("'distro'" in p for p in found), found

    from cloudseed.agent.distros import Distro

    class Odd(Distro):
        family = "odd"
        os_ids = ("Odd",)
        renderers = ("carrier-pigeon",)

    found = contract_problems(distro_contract, _module("even", DISTRO=Odd), "even", ["eni"])
    for text in ("family is 'odd'", "lower-case", "carrier-pigeon", "set_timezone()", "ca_certs_layout()"):
        assert any(text in p for p in found), (text, found)
    assert distro_contract.claimed_twice({"a": Odd, "b": type("B", (Distro,), {"os_ids": ("Odd",)})}) == \
        ["'Odd' is claimed by a.py and b.py"]

    found = contract_problems(verb_contract, _module("v", HELP=3, configure=lambda p: None, run=lambda: 0), "v")
    assert any(p.startswith("HELP") for p in found) and any(p.startswith("run") for p in found), found


@pytest.mark.parametrize("directory", sorted(KINDS))
def test_every_kind_has_plugins(directory):
    assert plugin_files(directory), directory


def test_the_cli_finds_its_verbs_from_the_files(capsys):
    from cloudseed.cli import main, verb_names

    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    # listed as users type them: collect-logs, cloud-id (the file names use underscores)
    typed = [verb.replace("_", "-") for verb in verb_names()]
    missing = [verb for verb in typed if not re.search(rf"^    {verb}(\s|$)", listed, re.MULTILINE)]
    assert not missing, f"verbs missing from --help: {missing}"
    for not_a_verb in ("_contract", "__init__", "nope"):
        with pytest.raises(SystemExit) as exit_info:
            main([not_a_verb])
        assert exit_info.value.code == 2
    assert f"unknown command {not_a_verb!r}" in capsys.readouterr().err
