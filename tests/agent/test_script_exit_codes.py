"""cloudbase-init's exit codes 1001-1003 of user scripts, over full boots of a temporary root.

Scripts really run (a chrooted busybox shell); each boot is the four stages with an empty /run,
as after a real reboot. In a temporary root nothing reboots: the reboot a script asks for is
recorded in the status (and logged, as power_state_change does offline), and the next "boot" is
the stages run again.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import textwrap

import pytest

from cloudseed.agent.boot.stages import Agent
from cloudseed.agent.modules._script_exits import meaning
from cloudseed.agent.state.status import summarize

SEED = "/var/lib/cloud/seed/nocloud"
MODULES = """\
network: {config: disabled}
cloud_init_modules: [write_files]
cloud_config_modules: [runcmd]
cloud_final_modules: [scripts_per_once, scripts_per_boot, scripts_per_instance, scripts_user, final_message]
"""
RUNS = "/var/tmp/runs"


def seed(root, user_data: str) -> None:
    root.write("/etc/cloudseed/cloud.cfg.d/00-core-modules.cfg", MODULES)
    root.write(f"{SEED}/meta-data", "instance-id: iid-exits\n")
    root.write(f"{SEED}/user-data", user_data)


def boot(root) -> int:
    """One boot: /run is empty at the start of every boot."""
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    return Agent(root).run_all()


def status(root) -> dict:
    return json.loads(root.read_text("/run/cloudseed/status.json"))


def summary(root) -> dict:
    return summarize(status(root))


def runs(root, path: str = RUNS) -> list[str]:
    return root.read_text(path).split() if root.exists(path) else []


def final_modules(root) -> dict[str, dict]:
    return {m["name"]: m for m in status(root)["v1"]["modules-final"]["modules"]}


def runcmd_exiting(*codes: int) -> str:
    """A runcmd that logs each run and exits codes[n] on its n-th run (the last code afterwards)."""
    cases = " ".join(f"{n + 1}) exit {code} ;;" for n, code in enumerate(codes[:-1]))
    return textwrap.dedent(f"""\
        #cloud-config
        runcmd:
          - echo run >> {RUNS}
          - n=$(grep -c run {RUNS}); case $n in {cases} *) exit {codes[-1]} ;; esac
        """)


@pytest.mark.parametrize("code,expected", [(1001, 1001), (233, 1001), (234, 1002), (235, 1003), (1003, 1003),
                                           (0, None), (1, None), (232, None), (236, None)])
def test_linux_exit_statuses_carry_the_codes_mod_256(code, expected):
    assert meaning(code) == expected


def test_the_shell_reports_exit_1001_as_233(shell_target):
    shell_target.write("/var/tmp/x", "#!/bin/sh\nexit 1001\n", mode=0o755)
    assert shell_target.run(["/var/tmp/x"], check=False).returncode == 233


def test_1001_reboots_now_and_the_script_does_not_run_again(shell_target, caplog):
    root = shell_target
    seed(root, runcmd_exiting(1001))
    with caplog.at_level(logging.INFO):
        assert boot(root) == 0
    assert runs(root) == ["run"]
    reboot = status(root)["v1"]["reboot"]
    assert "/scripts/runcmd exited 233 (1001: reboot now, done)" in reboot
    assert "offline root: would run shutdown -r now" in caplog.text
    modules = final_modules(root)
    assert modules["scripts_user"]["status"] == "ok" and modules["scripts_user"]["reboot"] == reboot
    assert modules["final_message"] == {"name": "final_message", "status": "skipped", "seconds": 0.0,
                                        "reason": "after the reboot scripts_user asked for"}
    # the boot is not over: no result, no boot-finished, still running for `status --wait`
    assert summary(root)["status"] == "running"
    assert not root.exists("/run/cloudseed/result.json")
    assert not root.exists("/var/lib/cloudseed/instances/iid-exits/sem/scripts_user")
    assert root.exists("/var/lib/cloudseed/instances/iid-exits/sem/runcmd")  # the config stage was saved
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert boot(root) == 0  # the reboot
    assert runs(root) == ["run"]
    assert "finished before the reboot; not run again" in caplog.text
    assert summary(root)["status"] == "done"
    assert "reboot" not in status(root)["v1"]
    assert final_modules(root)["final_message"]["status"] == "ok"
    assert root.exists("/var/lib/cloudseed/instances/iid-exits/sem/scripts_user")
    assert boot(root) == 0
    assert runs(root) == ["run"]


def test_1002_does_not_reboot_and_runs_again_at_the_next_boot(shell_target):
    root = shell_target
    seed(root, runcmd_exiting(1002, 0))
    assert boot(root) == 0
    assert runs(root) == ["run"]
    assert summary(root)["status"] == "done"  # no reboot: this boot is over
    assert "reboot" not in status(root)["v1"]
    modules = final_modules(root)
    assert modules["scripts_user"]["status"] == "ok"
    assert modules["scripts_user"]["reason"].startswith("runs again at the next boot: ")
    assert "(exit 234: run again at the next boot)" in modules["scripts_user"]["reason"]
    assert modules["final_message"]["status"] == "ok"
    assert boot(root) == 0
    assert runs(root) == ["run", "run"]
    assert boot(root) == 0
    assert runs(root) == ["run", "run"]  # it exited 0 the second time: done
    assert summary(root)["status"] == "done"


def test_1003_reboots_and_runs_again(shell_target, caplog):
    root = shell_target
    seed(root, runcmd_exiting(1003, 0))
    with caplog.at_level(logging.INFO):
        assert boot(root) == 0
    assert "(1003: reboot now, run again)" in status(root)["v1"]["reboot"]
    assert "would run shutdown -r now" in caplog.text
    assert summary(root)["status"] == "running"
    assert boot(root) == 0
    assert runs(root) == ["run", "run"]
    assert summary(root)["status"] == "done"
    assert boot(root) == 0
    assert runs(root) == ["run", "run"]


def test_a_script_that_always_asks_again_is_stopped_with_a_named_error(shell_target):
    root = shell_target
    seed(root, runcmd_exiting(1003) + "script_exit_codes:\n  max_reruns: 2\n")
    for n in (1, 2):
        assert boot(root) == 0
        assert summary(root)["status"] == "running" and len(runs(root)) == n
    assert boot(root) == 1
    assert len(runs(root)) == 3  # the first run and two re-runs
    st = summary(root)
    assert st["status"] == "error"
    assert "reboot" not in status(root)["v1"]
    [error] = st["errors"]
    assert error.startswith("scripts_user: 1 of 1 scripts failed: ")
    assert error.endswith("/scripts/runcmd (exit 235: asked to run again 3 times in a row, more than "
                          "script_exit_codes.max_reruns = 2; stopped, no reboot)")
    assert boot(root) == 1  # never run again, and the error is still said
    assert len(runs(root)) == 3
    assert "not run: it asked to run again 3 times in a row" in summary(root)["errors"][0]


def test_the_scripts_before_the_reboot_are_not_run_again_and_the_rest_run_after_it(shell_target):
    root = shell_target
    seed(root, "#cloud-config\n{}\n")
    per_instance = "/var/lib/cloudseed/scripts/per-instance"
    for name, body in (("10-first", "exit 0"), ("20-kernel", "exit 1001"), ("30-after", "exit 0")):
        root.write(f"{per_instance}/{name}", f"#!/bin/sh\necho {name} >> {RUNS}\n{body}\n", mode=0o755)
    root.write("/var/lib/cloudseed/scripts/per-boot/10-boot", f"#!/bin/sh\necho boot >> {RUNS}\n", mode=0o755)
    assert boot(root) == 0
    assert runs(root) == ["boot", "10-first", "20-kernel"]
    assert final_modules(root)["scripts_user"]["reason"] == "after the reboot scripts_per_instance asked for"
    assert boot(root) == 0
    assert runs(root) == ["boot", "10-first", "20-kernel", "boot", "30-after"]
    assert summary(root)["status"] == "done"
    assert boot(root) == 0
    assert runs(root)[5:] == ["boot"]


def test_a_per_boot_script_reboots_once_per_boot_not_in_a_loop(shell_target):
    root = shell_target
    seed(root, "#cloud-config\n{}\n")
    root.write("/var/lib/cloudseed/scripts/per-boot/10-check",
               f"#!/bin/sh\necho check >> {RUNS}\nexit 1001\n", mode=0o755)
    root.write("/var/lib/cloudseed/scripts/per-boot/20-then", f"#!/bin/sh\necho then >> {RUNS}\nexit 1002\n",
               mode=0o755)
    assert boot(root) == 0
    assert runs(root) == ["check"] and summary(root)["status"] == "running"
    assert boot(root) == 0  # the boot the script asked for goes on where it stopped
    assert runs(root) == ["check", "then"] and summary(root)["status"] == "done"  # 1002: fine for per-boot
    assert boot(root) == 0  # a later boot is a new boot
    assert runs(root) == ["check", "then", "check"] and summary(root)["status"] == "running"


def test_switched_off_the_codes_are_plain_failures(shell_target):
    root = shell_target
    seed(root, runcmd_exiting(1001) + "script_exit_codes:\n  enabled: false\n")
    assert boot(root) == 1
    assert summary(root)["status"] == "error"
    assert summary(root)["errors"][0].endswith("/scripts/runcmd (exit 233)")
    assert "reboot" not in status(root)["v1"]


def test_vendor_scripts_honour_the_codes_and_their_prefix(shell_target):
    root = shell_target
    seed(root, "#cloud-config\nvendor_data: {prefix: [env, FROM_PREFIX=yes]}\n")
    vendor = "/var/lib/cloudseed/instances/iid-exits/scripts/vendor/setup"
    root.write(vendor, f'#!/bin/sh\necho "vendor-$FROM_PREFIX" >> {RUNS}\n[ -e /var/tmp/again ] && exit 0\n'
                       "touch /var/tmp/again\nexit 1003\n", mode=0o700)
    cfg = root.read_text("/etc/cloudseed/cloud.cfg.d/00-core-modules.cfg")
    root.write("/etc/cloudseed/cloud.cfg.d/00-core-modules.cfg", cfg.replace("[scripts_per_once", "[scripts_vendor, "
                                                                              "scripts_per_once"))
    assert boot(root) == 0
    assert runs(root) == ["vendor-yes"]
    assert "scripts/vendor/setup exited 235" in status(root)["v1"]["reboot"]
    assert boot(root) == 0
    assert runs(root) == ["vendor-yes", "vendor-yes"] and summary(root)["status"] == "done"
