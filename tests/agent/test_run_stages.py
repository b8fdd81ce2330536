"""One way to run the stages (``stages.run_stages``): in order, asking a gate before each later stage.

The boot's hand-off, ``cloudseed boot`` all at once and a unit's own stage are the one sequence
with another gate or entry point; these tests run real stages from a NoCloud seed in a temporary
root and read what each gate was told, in which order, and what the sequence left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cloudseed.agent.boot.handoff import AtOnce
from cloudseed.agent.boot.sshd_order import RECORD
from cloudseed.agent.boot.stages import STAGES, BootState, run_own_stage, run_stages

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = ("network:\n  config: disabled\nssh_genkeytypes: []\ncloud_init_modules:\n  - write_files\n"
           "cloud_config_modules:\n  - write_files_deferred\ncloud_final_modules:\n  - final_message\n")
USER_DATA = ("#cloud-config\nwrite_files:\n  - {path: /etc/early, content: e}\n"
             "  - {path: /etc/late, content: l, defer: true}\n")


class Told(AtOnce):
    """A gate that never waits (``AtOnce``) and keeps what the sequence told it."""

    def __init__(self, root=None):
        self.events: list[str] = []
        self.root = root

    def ready(self, status: str) -> None:
        self.events.append(f"ready: {status}")

    def wait_for(self, stage: str) -> None:
        finished = self.root is not None and _finished(self.root)
        self.events.append(f"wait {stage}" + (f" after {sorted(k for k, v in finished.items() if v)}"
                                                if finished else ""))

    def done(self, stage: str, code: int) -> None:
        self.events.append(f"done {stage} {code}")


@pytest.fixture
def seeded(target):
    target.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES)
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-sequence\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data", USER_DATA)
    return target


def _finished(root) -> dict[str, bool]:
    if not root.exists("/run/cloudseed/status.json"):
        return {}
    v1 = json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]
    return {k: bool((v1.get(k) or {}).get("finished")) for k in ("init-local", "init", "modules-config",
                                                                  "modules-final")}


def test_the_gate_is_asked_before_each_later_stage_and_told_its_verdict(seeded):
    gate = Told(seeded)
    assert run_stages(BootState.load(seeded), gate) == 0
    assert gate.events == [
        "ready: local stage done",
        "wait network after ['init-local']", "done network 0",
        "wait config after ['init', 'init-local']", "done config 0",
        "wait final after ['init', 'init-local', 'modules-config']", "done final 0",
    ]
    assert seeded.read_text("/etc/early") == "e" and seeded.read_text("/etc/late") == "l"
    assert seeded.exists(RECORD)  # a whole boot ran here: sshd's order for the next boot is recorded


def test_a_stage_that_fails_gives_its_unit_1_and_the_boot_goes_on(seeded):
    seeded.write("/var/lib/cloud/seed/nocloud/user-data",
                 "#cloud-config\nwrite_files:\n  - {path: /etc/x, content: x, owner: 'nosuchuser:root'}\n")
    gate = Told()
    assert run_stages(BootState.load(seeded), gate) == 1
    assert [e for e in gate.events if e.startswith("done")] == ["done network 1", "done config 0", "done final 0"]
    assert all(_finished(seeded).values())


def test_a_disabled_agent_tells_each_later_unit_0_and_runs_nothing_more(seeded):
    seeded.write("/run/cloudseed/disabled", "disabled for the test\n")
    gate = Told()
    assert run_stages(BootState.load(seeded), gate) == 0
    assert gate.events == ["ready: disabled: disabled for the test", "done network 0", "done config 0",
                           "done final 0"]
    assert not seeded.exists("/etc/early") and not seeded.exists(RECORD)


def test_a_unit_entering_at_its_stage_runs_that_stage_alone(seeded):
    """The per-unit fallback (``cloudseed init``, ``cloudseed modules --mode ...``): the same sequence
    entered at one stage, in a process of its own; no record for the next boot (no whole boot ran)."""
    for stage, finished in (("local", ["init-local"]), ("network", ["init", "init-local"]),
                            ("config", ["init", "init-local", "modules-config"])):
        assert run_own_stage(BootState.load(seeded), stage) == 0
        assert sorted(k for k, v in _finished(seeded).items() if v) == finished
    assert seeded.read_text("/etc/late") == "l"
    assert run_own_stage(BootState.load(seeded), "final") == 0
    assert all(_finished(seeded).values()) and not seeded.exists(RECORD)


def test_a_stage_that_does_not_exist_is_refused_before_anything_runs(seeded):
    with pytest.raises(ValueError, match=r"unknown stage 'init' \(local, network, config, final\)"):
        run_own_stage(BootState.load(seeded), "init")
    assert STAGES == ("local", "network", "config", "final") and not _finished(seeded)


def test_all_at_once_leaves_the_process_priority_alone(seeded):
    """No unit's ``Nice=`` to step out of and no idle time to preload in: ``cloudseed boot`` (and a
    test) keeps the priority it was started with, where the hand-off would move to 0 for the
    network stage."""
    if os.geteuid() != 0:
        pytest.skip("raising a priority back needs root")
    code = f"""
import os
from cloudseed.core.root import TargetRoot
from cloudseed.agent.boot.stages import BootState, run_all
os.setpriority(os.PRIO_PROCESS, 0, 7)
seen = []
real = os.setpriority
os.setpriority = lambda which, who, value: seen.append(value) or real(which, who, value)
code = run_all(BootState.load(TargetRoot({seeded.top!r})))
print(code, os.getpriority(os.PRIO_PROCESS, 0), seen)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == "0 7 []"


def test_with_units_the_config_stage_steps_aside_for_sshd_and_final_comes_back(seeded):
    """A paced gate (the boot's units): the network stage at the units' raised priority, the config
    stage (it starts together with sshd) at niceness 10, the final stage at the ordinary one."""
    if os.geteuid() != 0:
        pytest.skip("raising a priority back needs root")
    code = f"""
import os
from cloudseed.core.root import TargetRoot
from cloudseed.agent.boot.handoff import AtOnce
from cloudseed.agent.boot.stages import BootState, run_stages

class Paced(AtOnce):
    paced = True
    def wait_for(self, stage):
        seen.append(stage)

os.setpriority(os.PRIO_PROCESS, 0, -5)
seen = []
real = os.setpriority
os.setpriority = lambda which, who, value: seen.append(value) or real(which, who, value)
code = run_stages(BootState.load(TargetRoot({seeded.top!r})), Paced())
print(code, os.getpriority(os.PRIO_PROCESS, 0), seen)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == "0 0 ['network', 'config', 10, 'final', 0]"
