"""The table of the modules' declarations (``modules/_declared.py``): a stage decides from it that a
module is skipped without importing the module, and decides exactly as the module's own ``MODULE``
would (issue 30: the imports of about sixty modules were over a second of an emulated reboot)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(REPO, ".venv", "bin", "cloudseed")


def test_the_table_is_what_every_module_declares():
    from cloudseed.agent.config.module_table import main
    from cloudseed.agent.modules import all_module_names, load_module
    from cloudseed.agent.modules._declared import TABLE

    assert main(["--check"]) == 0
    assert sorted(TABLE) == all_module_names()
    for name in all_module_names():
        spec = load_module(name)[0]
        assert TABLE[name] == (spec.stage, spec.frequency, tuple(spec.activate_by), tuple(spec.distros)), name


def test_a_stale_table_is_found():
    """A module whose declaration changed (here: its frequency) makes ``--check`` fail."""
    from cloudseed.agent.config.module_table import generated_file
    from cloudseed.agent.modules import _declared

    with open(_declared.__file__) as f:
        text = f.read()
    stale = text.replace("'bootcmd': ('init', 'per-boot',", "'bootcmd': ('init', 'per-instance',")
    assert stale != text
    assert generated_file(stale) == text


RUN = """
import json, sys
from cloudseed.core.root import TargetRoot
from cloudseed.agent.modules import ModuleContext, run_stage_modules
from cloudseed.agent.modules import _declared
from cloudseed.agent.state import Paths
if {empty!r}:
    _declared.TABLE.clear()  # every module imported to learn its declaration (as before the table)
root = TargetRoot({top!r})
ctx = ModuleContext(root=root, paths=Paths(root), cfg={cfg!r}, instance_id="i-table", stage="final",
                    datasource=None, instance_data={{}})
names = {names!r}
results = [[r.name, r.status, r.reason, r.frequency] for r in run_stage_modules(ctx, names)]
imported = sorted(n for n in names if "cloudseed.agent.modules." + n in sys.modules)
print(json.dumps([results, imported]))
"""


def _run(target, names: list[str], cfg: dict, empty: bool) -> tuple[list, list]:
    code = RUN.format(empty=empty, top=target.top, cfg=cfg, names=names)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    results, imported = json.loads(out.stdout.strip().splitlines()[-1])
    return results, imported


def test_a_stage_imports_only_the_modules_it_runs_and_decides_as_the_modules_do(target):
    """Not configured (byobu, chef), already ran for this instance (runcmd, set_passwords): skipped
    without an import; final_message runs (imported). The same list with no table imports all five
    and gives the same results, reasons and frequencies."""
    for name in ("runcmd", "set_passwords"):
        target.write(f"/var/lib/cloudseed/instances/i-table/sem/{name}", "1\n")
    names = ["byobu", "chef", "runcmd", "set_passwords", "final_message"]
    cfg = {"runcmd": [["true"]], "final_message": "done $UPTIME"}
    results, imported = _run(target, names, cfg, empty=False)
    assert [r[:2] for r in results] == [["byobu", "skipped"], ["chef", "skipped"], ["runcmd", "skipped"],
                                       ["set_passwords", "skipped"], ["final_message", "ok"]]
    assert results[2][2] == "already ran (per-instance)"
    assert imported == ["final_message"]
    before_table, all_imported = _run(target, names, cfg, empty=True)
    assert all_imported == sorted(names)
    assert before_table == results


def test_a_module_the_table_does_not_know_is_imported_to_decide(target):
    """A module added without regenerating the table still runs by its own declaration."""
    code = RUN.replace("_declared.TABLE.clear()", "del _declared.TABLE['runcmd']")
    out = subprocess.run([sys.executable, "-c", code.format(empty=True, top=target.top, cfg={},
                                                             names=["runcmd", "byobu"])],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    results, imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert [r[:3] for r in results] == [["runcmd", "skipped", "no configuration for it"],
                                       ["byobu", "skipped", "no configuration for it"]]
    assert imported == ["runcmd"]


def test_a_reboot_preloads_only_the_modules_that_will_run(target):
    """While networking comes up the boot's process imports the later stages' modules; at the reboot of
    an unchanged instance not those that already ran (write_files) or that nothing configures
    (runcmd), but the per-boot ones (scripts_per_boot) and those that run at every boot (final_message)."""
    target.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg",
                 "network:\n  config: disabled\ncloud_init_modules:\n  - write_files\n"
                 "cloud_config_modules:\n  - runcmd\ncloud_final_modules:\n  - scripts_per_boot\n  - final_message\n")
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-preload\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data",
                 "#cloud-config\nwrite_files:\n  - {path: /etc/kept, content: k}\n")
    first = subprocess.run([CLI, "--root", target.top, "boot"], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    target.remove_tree("/run/cloudseed")
    code = f"""
import json, sys
from cloudseed.core.root import TargetRoot
from cloudseed.agent.boot.performance import preload_later_stages
from cloudseed.agent.boot.stages import BootState, run_local
state = BootState.load(TargetRoot({target.top!r}))
code = run_local(state)
preload_later_stages(state)
names = ("write_files", "runcmd", "scripts_per_boot", "final_message")
print(json.dumps([code, sorted(n for n in names if "cloudseed.agent.modules." + n in sys.modules)]))
"""
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert again.returncode == 0, again.stderr
    code, imported = json.loads(again.stdout.strip().splitlines()[-1])
    assert code == 0
    assert imported == ["final_message", "scripts_per_boot"]
