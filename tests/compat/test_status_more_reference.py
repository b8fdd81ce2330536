"""More boots for the ``status --format json`` differential (``test_status_reference.py``'s method).

cloud-init 26.2's own status code reads the files of a root cloudseed booted part of the way or
all of it, and its JSON document must be cloudseed's, key for key and value for value (cloudseed's
own keys aside), with the same exit code: a boot stopped after the local stage, one stopped after
the config stage, an error beside a warning, a deprecation beside a warning.
"""

from __future__ import annotations

import pytest

from tests.compat.status_support import OURS_ONLY, booted, both


@pytest.mark.reference
@pytest.mark.parametrize("user_data, stages, status, running, condition, code", [
    ("#cloud-config\n{}\n", 1, "running", "running", "healthy", 0),
    ("#cloud-config\n{}\n", 3, "running", "running", "healthy", 0),
    ("#cloud-config\nbootcmd: 5\nno_such_key: 1\n", 4, "error", "done", "error", 1),
    ("#cloud-config\nusers: [{name: bob, lock-passwd: true}]\nno_such_key: 1\n", 4, "done", "done", "degraded", 2),
], ids=["after-local", "after-config", "error-and-warning", "deprecation-and-warning"])
def test_cloud_init_26_reads_the_same_document(tmp_path, user_data, stages, status, running, condition, code):
    ours, theirs = both(booted(tmp_path, user_data, stages))
    assert ours["status"] == status
    assert (theirs["running"], theirs["condition"]) == (running, condition)
    assert {k: v for k, v in ours.items() if k not in OURS_ONLY + ("_exit",)} == theirs["document"]
    assert ours["_exit"] == theirs["exit"] == code
