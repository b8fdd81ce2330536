"""The final stage's files read while its unit waits for ``multi-user.target`` (issue 30).

Real stages from a NoCloud seed in a temporary root: what is read ahead is what the stage would have
read, reading writes nothing and runs nothing, and a file that changed after it was read is read
again by the stage (the change is what the stage runs with).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from cloudseed.agent.boot.handoff import AtOnce
from cloudseed.agent.boot.prepared_stage import prepare
from cloudseed.agent.boot.stages import BootState, run_modules, run_stages

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = ("network:\n  config: disabled\nssh_genkeytypes: []\ncloud_init_modules:\n  - write_files\n"
           "cloud_config_modules:\n  - write_files_deferred\n"
           "cloud_final_modules:\n  - scripts_per_boot\n  - final_message\n")
USER_DATA = ("#cloud-config\nfinal_message: 'read ahead: $DATASOURCE'\n"
             "write_files:\n  - {path: /etc/early, content: e}\n")
COMBINED = "/run/cloudseed/combined-cloud-config.json"


@pytest.fixture
def rebooted(target):
    """A root whose instance booted once, then a reboot's process up to the end of its config stage."""
    target.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES)
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-prepared\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data", USER_DATA)
    assert run_stages(BootState.load(target), AtOnce()) == 0
    shutil.rmtree(target.path("/run"))  # a tmpfs: empty at the reboot
    state = BootState.load(target)
    assert run_stages(state, AtOnce(), ("local", "network", "config")) == 0
    return target, state


def _tree(top: str) -> dict[str, tuple]:
    found = {}
    for directory, _dirs, files in os.walk(top):
        for name in files:
            info = os.lstat(os.path.join(directory, name))
            found[os.path.join(directory, name)] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return found


def test_what_is_read_ahead_is_what_the_stage_reads_and_nothing_is_written(rebooted, capfd):
    root, state = rebooted
    before = _tree(root.top)
    prepared = prepare(state)
    assert _tree(root.top) == before  # reading only: no file written, moved or set aside
    assert prepared is not None and prepared.holds(state)
    assert prepared.cfg == json.loads(root.read_text(COMBINED))
    assert prepared.cfg["final_message"] == "read ahead: $DATASOURCE"
    assert prepared.data["v1"]["instance_id"] == "iid-prepared" and prepared.datasource is state.datasource
    capfd.readouterr()
    assert run_modules(state, "final", prepared) == 0
    assert "read ahead: NoCloud" in capfd.readouterr().err
    final = json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]["modules-final"]
    assert [(m["name"], m["status"]) for m in final["modules"]] == [("scripts_per_boot", "ok"),
                                                                     ("final_message", "ok")]
    assert final["errors"] == [] and final["warnings"] == []


def test_a_file_changed_after_it_was_read_is_read_again_by_the_stage(rebooted, capfd):
    """The merged configuration rewritten between the reading and the unit's start (a new inode, as
    every state write makes): the stage runs with the new one."""
    root, state = rebooted
    prepared = prepare(state)
    assert prepared is not None
    cfg = json.loads(root.read_text(COMBINED))
    root.write(COMBINED, json.dumps({**cfg, "final_message": "read again: $DATASOURCE"}), mode=0o600)
    assert not prepared.holds(state)
    capfd.readouterr()
    assert run_modules(state, "final", prepared) == 0
    err = capfd.readouterr().err
    assert "read again: NoCloud" in err and "read ahead" not in err


def test_damaged_instance_data_is_left_to_the_stage_which_repairs_it(rebooted):
    """Reading ahead never sets a file aside: the stage does, as before, and rebuilds it."""
    root, state = rebooted
    root.write("/run/cloudseed/instance-data.json", "{not json", mode=0o644)
    before = _tree(root.top)
    assert prepare(state) is None
    assert _tree(root.top) == before
    assert run_modules(state, "final", None) == 0
    assert json.loads(root.read_text("/run/cloudseed/instance-data.json"))["v1"]["instance_id"] == "iid-prepared"


PACED = """
import json, os, sys
from cloudseed.core.root import TargetRoot
from cloudseed.agent.boot import prepared_stage
from cloudseed.agent.boot.handoff import AtOnce
from cloudseed.agent.boot.stages import BootState, run_stages
root = TargetRoot(sys.argv[1])
events = []
real = prepared_stage.prepare
def prepare(state):
    found = real(state)
    events.append(("read ahead", found is not None))
    return found
prepared_stage.prepare = prepare
class Units(AtOnce):
    paced = True  # as the boot's gate: each later stage when its unit asks
    def asked(self, stage):
        return stage != "final"  # networking was up at once; multi-user.target is not reached yet
    def wait_for(self, stage):
        if stage == "final":
            v1 = json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]
            events.append(("unit asks", v1["modules-final"].get("start") is not None,
                           os.path.exists(root.path("/var/lib/cloud/instance/boot-finished"))))
print(json.dumps([run_stages(BootState.load(root), Units()), events]))
"""


def test_the_boot_reads_the_final_stage_ahead_and_runs_nothing_of_it_before_its_unit_asks(target):
    """The boot's sequence with a paced gate (priorities change: its own process): the final stage's
    files are read before its unit asks, while the stage has not started (nor has final_message
    written ``boot-finished``, which the reboot's local stage removed)."""
    target.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES)
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-prepared\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data", USER_DATA)
    assert run_stages(BootState.load(target), AtOnce()) == 0  # the first boot; the next one is the reboot
    assert target.exists("/var/lib/cloud/instance/boot-finished")
    shutil.rmtree(target.path("/run"))
    out = subprocess.run([sys.executable, "-c", PACED, target.top], capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    code, events = json.loads(out.stdout.strip().splitlines()[-1])
    assert code == 0
    assert events == [["read ahead", True], ["unit asks", False, False]]
    assert target.exists("/var/lib/cloud/instance/boot-finished")  # the stage ran once asked
