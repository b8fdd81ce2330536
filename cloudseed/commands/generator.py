"""``cloudseed generator NORMAL_DIR [EARLY_DIR LATE_DIR]``: the systemd generator's decision.

Runs at every boot before any unit starts. When a datasource can exist here (see
``cloudseed.agent.boot.detect``) it gives ``multi-user.target`` a drop-in that wants
``cloudseed.target`` (``NORMAL_DIR/multi-user.target.d/50-cloudseed.conf``, as the shell generator
does) and writes ``/run/cloudseed/enabled`` (JSON: which datasources may exist and why); otherwise
it writes no drop-in and writes the reason to ``/run/cloudseed/disabled``. Paths are inside ``--root``.
When this disk has already served an instance (most likely a reboot) it also gives
``cloudseed-local.service`` a drop-in that lowers its priority, as the shell generator does.
"""

from __future__ import annotations

import argparse
import json
import time

HELP = "systemd generator: enable the agent for this boot only when a datasource can exist"

# how both generators switch the agent on (the same name and text as cloudseed-generator writes);
# OLD_LINK is how versions before did it, removed where a run finds it
ON_DROPIN = "multi-user.target.d/50-cloudseed.conf"
ON_DROPIN_TEXT = ("# cloudseed-generator: the agent runs this boot (/run/cloudseed/enabled says why)\n"
                  "[Unit]\nWants=cloudseed.target\n")
OLD_LINK = "multi-user.target.wants/cloudseed.target"
RUN_DIR = "/run/cloudseed"
INSTANCE_LINK = "/var/lib/cloudseed/instance"
# same name and text as cloudseed-generator (the shell one) writes
REBOOT_DROPIN = "cloudseed-local.service.d/50-provisioned-disk.conf"
REBOOT_DROPIN_TEXT = ("# cloudseed-generator: /var/lib/cloudseed/instance exists (most likely a reboot)\n"
                      "[Service]\nNice=10\n")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("normal_dir", metavar="NORMAL_DIR", help="systemd's normal generator directory")
    parser.add_argument("early_dir", metavar="EARLY_DIR", nargs="?", help="(unused)")
    parser.add_argument("late_dir", metavar="LATE_DIR", nargs="?", help="(unused)")


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.boot.detect import decide
    from cloudseed.agent.config import load_system_config, read_cmdline
    from cloudseed.core.root import TargetRoot

    started = time.monotonic()
    root = TargetRoot(args.root)
    cmdline = read_cmdline(root)
    errors: list[str] = []
    cfg = load_system_config(root, cmdline, errors)
    verdict = decide(root, cfg, cmdline)
    verdict["seconds"] = round(time.monotonic() - started, 4)
    if errors:
        verdict["config_errors"] = errors
    normal = args.normal_dir.rstrip("/")
    root.makedirs(RUN_DIR)
    if root.islink(f"{normal}/{OLD_LINK}"):
        root.remove(f"{normal}/{OLD_LINK}")
    if verdict["enabled"]:
        root.write(f"{normal}/{ON_DROPIN}", ON_DROPIN_TEXT, mode=0o644)
        root.remove(f"{RUN_DIR}/disabled")
        root.write(f"{RUN_DIR}/enabled", json.dumps(verdict, indent=1) + "\n", mode=0o644)
        dropin = f"{normal}/{REBOOT_DROPIN}"
        if root.islink(INSTANCE_LINK):
            root.write(dropin, REBOOT_DROPIN_TEXT, mode=0o644)
            # sshd keeps the units' ordering (after the network stage): only the shell generator
            # lets it go early, from facts this configuration may change (docs/lab.md)
            root.write(f"{RUN_DIR}/sshd-waits", "decided by the Python generator (the configuration names "
                       "datasources)\n", mode=0o644)
        else:
            root.remove(dropin)
    else:
        root.remove(f"{normal}/{ON_DROPIN}")
        root.remove(f"{RUN_DIR}/enabled")
        root.write(f"{RUN_DIR}/disabled", verdict["reason"] + "\n", mode=0o644)
    if getattr(args, "debug", False):
        print(json.dumps(verdict))
    return 0
