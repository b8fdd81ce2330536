"""``status`` against cloud-init: its own status code reading the files cloudseed's boot wrote.

cloud-init 26.2's ``get_status_details`` and ``print_status`` (systemd's unit check switched off:
no systemd runs these roots) read ``status.json`` and ``result.json`` of a root cloudseed booted
and print their JSON document: cloudseed's ``status --format json`` prints the same document
(cloud-init's keys, cloudseed's own beside them), and exits as cloud-init 23.4+ does (2 when
degraded). With ``status_exit_codes: "22.4"`` (what the Debian 12 package sets) it exits as
cloud-init 22.4's code does on the same files (0 when degraded). So a tool built on cloud-init's
status (``cloud-init status --wait`` in Packer, Terraform) sees what it would have seen.
"""

from __future__ import annotations

import json

import pytest

from cloudseed.core.root import TargetRoot
from tests.compat.status_support import OURS_ONLY, booted, both, ours_status
from tests.reference import OLD

_THEIRS_22_4 = r"""
import json, sys
from cloudinit import helpers
from cloudinit.cmd import status
status.uses_systemd = lambda: False
d = status.get_status_details(helpers.Paths({"run_dir": sys.argv[1], "cloud_dir": sys.argv[2]}))
print(json.dumps({"status": d.status.value, "exit": 1 if d.status == status.UXAppStatus.ERROR else 0}))
"""


@pytest.mark.reference
@pytest.mark.parametrize("user_data, stages, ours_status, running, condition", [
    ("#cloud-config\n{}\n", 4, "done", "done", "healthy"),
    ("#cloud-config\nbootcmd: 5\n", 4, "error", "done", "error"),
    ("#cloud-config\n{}\n", 2, "running", "running", "healthy"),
], ids=["done", "error", "running"])
def test_cloud_init_26_reads_our_status_files_as_we_report_them(tmp_path, user_data, stages, ours_status,
                                                               running, condition):
    ours, theirs = both(booted(tmp_path, user_data, stages))
    assert ours["status"] == ours_status
    assert (theirs["running"], theirs["condition"]) == (running, condition)
    assert theirs["errors"] == ours["errors"]
    assert theirs["datasource"] == ours["datasource"] == "nocloud"
    assert {k: v for k, v in ours.items() if k not in OURS_ONLY + ("_exit",)} == theirs["document"]
    assert ours["_exit"] == theirs["exit"]


@pytest.mark.reference
@pytest.mark.parametrize("user_data, level", [
    ("#cloud-config\nno_such_key: 1\n", "WARNING"),
    ("#cloud-config\nusers: [{name: bob, lock-passwd: true}]\n", "DEPRECATED"),
], ids=["unknown-key", "hyphenated-user-key"])
def test_degraded_is_the_same_document_and_each_releases_exit_code(tmp_path, user_data, level):
    top = booted(tmp_path, user_data)
    ours, theirs = both(top)
    assert (theirs["running"], theirs["condition"]) == ("done", "degraded")
    assert ours["status"] == "done" and ours["extended_status"] == "degraded done"
    assert list(ours["recoverable_errors"]) == [level]
    assert {k: v for k, v in ours.items() if k not in OURS_ONLY + ("_exit",)} == theirs["document"]
    assert ours["_exit"] == theirs["exit"] == 2  # the default rule: 23.4+'s
    old = json.loads(OLD.python(_THEIRS_22_4, f"{top}/run/cloudseed", f"{top}/var/lib/cloud").stdout)
    TargetRoot(top).write("/etc/cloudseed/cloud.cfg.d/05-status-exit-codes.cfg", 'status_exit_codes: "22.4"\n')
    assert ours_status(top)[1] == old["exit"] == 0 and old["status"] == "done"
