"""A root booted through some of the four stages, and its status as cloudseed and as cloud-init 26.2's
own status code report it (the ``status`` reference tests)."""

from __future__ import annotations

import json
import subprocess
import sys

from cloudseed.agent.boot.stages import BootState, run_local, run_modules, run_network
from cloudseed.core.root import TargetRoot
from tests.reference import NEW

CONFIG = ("network: {config: disabled}\ncloud_init_modules: [bootcmd]\ncloud_config_modules: [runcmd]\n"
          "cloud_final_modules: []\ndatasource_list: [NoCloud]\n")


_THEIRS = r"""
import argparse, contextlib, io, json, sys
from cloudinit import helpers
from cloudinit.cmd import status
status.uses_systemd = lambda: True  # as on a guest; its units are not asked (none run these roots)
status.systemd_failed = lambda wait: False
status._disabled_via_environment = lambda wait: False
d = status.get_status_details(helpers.Paths({"run_dir": sys.argv[1], "cloud_dir": sys.argv[2]}))
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    status.print_status(argparse.Namespace(format="json", long=False, wait=False), d)
code = 1 if d.condition_status == status.ConditionStatus.ERROR else (
    2 if d.condition_status == status.ConditionStatus.DEGRADED else 0)
print(json.dumps({"running": d.running_status.value, "condition": d.condition_status.value,
                  "errors": list(d.errors), "datasource": d.datasource, "document": json.loads(printed.getvalue()),
                  "exit": code}))
"""


OURS_ONLY = ("warnings", "exit_code", "stages", "reason")


def booted(tmp_path, user_data: str, stages: int = 4) -> str:
    root = TargetRoot(str(tmp_path))
    root.write("/etc/os-release", 'ID=debian\nVERSION_ID="12"\n')
    root.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg", CONFIG)
    root.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-status\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", user_data)
    state = BootState.load(root)
    steps = (run_local, run_network, lambda s: run_modules(s, "config"), lambda s: run_modules(s, "final"))
    for step in steps[:stages]:
        step(state)
    return str(tmp_path)


def ours_status(top: str) -> tuple[dict, int]:
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "--root", top, "status", "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    return json.loads(proc.stdout), proc.returncode


def both(top: str) -> tuple[dict, dict]:
    theirs = json.loads(NEW.python(_THEIRS, f"{top}/run/cloudseed", f"{top}/var/lib/cloud").stdout)
    ours, code = ours_status(top)
    ours["_exit"] = code
    return ours, theirs
