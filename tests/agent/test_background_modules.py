"""What a module leaves running beside the modules after it (``modules/_background.py``; resizefs in
the network stage): which modules wait for it, where the stages join it, how its failure is told.

The jobs are real processes (``sh`` on this machine's root); the modules run against a temporary
root. resizefs's own use, on a real loop disk, is in ``modules/test_resizefs.py``.
"""

from __future__ import annotations

import json
import time

import pytest

from cloudseed.agent.boot.handoff import AtOnce
from cloudseed.agent.boot.stages import BootState, run_stages
from cloudseed.agent.modules import ModuleContext, run_stage_modules
from cloudseed.agent.modules._background import Job, join_before, problems
from cloudseed.agent.modules.resizefs import may_run_beside
from cloudseed.agent.state import Paths
from cloudseed.core.root import TargetRoot

LIVE = TargetRoot("/")
STAGE_MODULES = ("network:\n  config: disabled\nssh_genkeytypes: []\ncloud_init_modules: [write_files]\n"
                 "cloud_config_modules: [write_files_deferred]\ncloud_final_modules: [final_message]\n")


def _job(script: str) -> Job:
    return Job("resizefs", "resize2fs /dev/vdz1", LIVE.start(["sh", "-c", script]), may_run_beside)


@pytest.fixture
def jobs():
    made: list[Job] = []
    yield made
    for job in made:  # nothing outlives the test
        if not job.joined:
            job.process.kill()
            job.process.communicate()


def _context(target, cfg: dict, background: list, instance_id: str = "i-beside") -> ModuleContext:
    ctx = ModuleContext(root=target, paths=Paths(target), cfg=cfg, instance_id=instance_id, stage="init")
    ctx.background = background
    return ctx


def test_modules_in_its_beside_list_run_while_it_goes_on(target, jobs):
    jobs.append(_job("exec sleep 30"))
    results = run_stage_modules(_context(target, {"hostname": "beside", "manage_etc_hosts": True}, jobs),
                                ["set_hostname", "update_etc_hosts"])
    assert [r.status for r in results] == ["ok", "ok"], [r.reason for r in results]
    assert not jobs[0].joined and jobs[0].process.poll() is None


def test_a_module_not_beside_it_waits_for_it_first(target, jobs, tmp_path):
    marker = tmp_path / "resized"
    jobs.append(_job(f"sleep 0.5; echo grown > {marker}"))
    started = time.monotonic()
    results = run_stage_modules(_context(target, {"write_files": [{"path": "/etc/after", "content": "x"}]}, jobs),
                                ["write_files"])
    assert results[0].status == "ok"
    assert jobs[0].joined and marker.read_text() == "grown\n" and time.monotonic() - started >= 0.4
    assert problems(jobs) == []


def test_a_module_that_does_not_run_does_not_wait(target, jobs):
    """disk_setup and write_files are not beside the resize, but follow it in the default list with
    nothing to do mostly: only a module that runs waits (else every first boot would wait at once)."""
    jobs.append(_job("exec sleep 30"))
    results = run_stage_modules(_context(target, {}, jobs), ["disk_setup", "write_files"])
    assert {r.status for r in results} == {"skipped"} and not jobs[0].joined


def test_mounts_waits_only_when_it_makes_a_swap_file(target, jobs):
    """mounts runs at every first boot (fstab's default entries): beside the resize, unless it makes
    a swap file, which needs the room (and ``size: auto`` reads the free space)."""
    jobs.append(_job("exec sleep 30"))
    assert run_stage_modules(_context(target, {}, jobs), ["mounts"])[0].status == "ok"
    assert not jobs[0].joined
    assert may_run_beside("mounts", {}) and not may_run_beside("mounts", {"swap": {"size": "auto"}})
    jobs[0].process.kill()
    run_stage_modules(_context(target, {"swap": {"filename": "/swap.img", "size": 0}}, jobs, "i-swap"), ["mounts"])
    assert jobs[0].joined


def test_its_failure_is_told_once_with_the_exit_status_and_last_line(jobs):
    jobs.append(_job("echo 'resize2fs 1.47.0'; echo 'Filesystem has unsupported feature(s)' >&2; exit 3"))
    join_before(jobs, "users_groups")  # may run beside it: not waited for here
    join_before(jobs, "disk_setup")
    told = problems(jobs)
    assert told == ["resizefs: resize2fs /dev/vdz1 exited 3: Filesystem has unsupported feature(s) "
                    "(finished beside the modules after it)"]
    assert problems(jobs) == []


def test_the_config_stage_waits_for_it_and_names_its_failure(target, jobs):
    """In the boot's one process the network stage's verdict (sshd waits for it) does not wait for
    the resize; the config stage does, before any of its modules, and its errors name the failure."""
    target.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", STAGE_MODULES)
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-beside\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data",
                 "#cloud-config\nwrite_files:\n  - {path: /etc/late, content: l, defer: true}\n")
    state = BootState.load(target)
    assert run_stages(state, AtOnce(), ("local", "network")) == 0
    jobs.append(_job("sleep 0.3; echo 'resize2fs: No space left on device' >&2; exit 1"))
    state.background = jobs
    assert run_stages(state, AtOnce(), ("config", "final")) == 1
    assert jobs[0].joined
    v1 = json.loads(target.read_text("/run/cloudseed/status.json"))["v1"]
    assert v1["modules-config"]["errors"] == [
        "resizefs: resize2fs /dev/vdz1 exited 1: resize2fs: No space left on device "
        "(finished beside the modules after it)"]
    assert v1["modules-final"]["errors"] == []  # told once
    assert target.read_text("/etc/late") == "l"  # the stage went on
