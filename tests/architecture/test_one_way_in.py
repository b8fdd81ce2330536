"""Each kind of risky operation has one way in: processes through the target-root layer, untrusted
YAML through the bounded loader.

- Every process the agent side starts (``agent/``, ``network/``, ``commands/``, ``core/``) goes through
  ``cloudseed/core/root.py``: ``TargetRoot.run``/``spawn``/``pipe`` on the target, or
  ``run_on_machine`` for the running machine's devices and network. Nothing else calls
  ``subprocess`` or ``os.system``/``exec``/``fork``.
- Every YAML document is parsed by ``cloudseed.core.yaml_loading`` (safe, with aliases bounded):
  no ``yaml.load``/``safe_load``/``compose`` anywhere else in the package.
"""

from __future__ import annotations

import os
import textwrap

import cloudseed
from tests.architecture import calls

PACKAGE = os.path.dirname(os.path.abspath(cloudseed.__file__))

PROCESS_CALLS = {f"subprocess.{n}" for n in ("run", "Popen", "call", "check_call", "check_output",
                                             "getoutput", "getstatusoutput")} | {
    f"os.{n}" for n in ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve",
                        "execvp", "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve",
                        "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe")} | {
    "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell", "pty.spawn", "pty.fork"}
AGENT_SIDE = ("agent", "network", "commands", "core")

YAML_CALLS = {f"yaml.{n}" for n in ("load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all",
                                    "full_load_all", "unsafe_load_all", "compose", "compose_all")}


def _listing(found: list[calls.Call]) -> str:
    return "\n".join(f"  {c.source}:{c.line}: {c.name}" for c in found)


def test_the_agent_side_starts_processes_only_through_the_target_root_layer():
    found = calls.calls_of(PACKAGE, PROCESS_CALLS, inside=AGENT_SIDE, allowed=("core/root.py",))
    assert not found, ("processes started outside cloudseed/core/root.py (use TargetRoot.run/spawn/pipe, "
                       "or run_on_machine for the machine's devices and network):\n" + _listing(found))


def test_every_yaml_document_goes_through_the_bounded_loader():
    found = calls.calls_of(PACKAGE, YAML_CALLS, allowed=("core/",))
    assert not found, ("YAML parsed without cloudseed.core.yaml_loading (load_yaml/compose_yaml bound aliases):\n"
                       + _listing(found))


def test_the_checks_see_every_way_of_writing_the_call(tmp_path):
    top = tmp_path / "cloudseed"
    (top / "agent").mkdir(parents=True)
    (top / "core").mkdir()
    (top / "agent" / "a.py").write_text(textwrap.dedent("""\
        import subprocess
        import subprocess as sp
        from subprocess import Popen as P
        import os
        import yaml
        from yaml import safe_load

        def f():
            import yaml as y
            subprocess.run(["x"])
            sp.check_output(["x"])
            P(["x"])
            os.execvp("x", ["x"])
            y.load("a", Loader=y.SafeLoader)
            safe_load("a")
            subprocess.DEVNULL, yaml.YAMLError, yaml.safe_dump({})   # references, not calls
        """))
    (top / "core" / "root.py").write_text("import subprocess\nsubprocess.run(['x'])\nimport yaml\nyaml.safe_load('')\n")
    found = [(c.source, c.line, c.name) for c in calls.calls_of(str(top), PROCESS_CALLS, inside=AGENT_SIDE,
                                                                 allowed=("core/root.py",))]
    a = "cloudseed/agent/a.py"
    assert found == [(a, 10, "subprocess.run"), (a, 11, "subprocess.check_output"), (a, 12, "subprocess.Popen"),
                     (a, 13, "os.execvp")]
    found = [(c.source, c.line, c.name) for c in calls.calls_of(str(top), YAML_CALLS, allowed=("core/",))]
    assert found == [(a, 14, "yaml.load"), (a, 15, "yaml.safe_load")]
