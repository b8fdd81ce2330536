"""write_files_deferred: only the entries marked defer: true, in the final stage (after users exist)."""

from __future__ import annotations

import os

from tests.agent.modules.module_support import run

CFG = {"write_files": [
    {"path": "/etc/early", "content": "early\n"},
    {"path": "/home/alice/.config/app.toml", "content": "token = 1\n", "owner": "alice:alice",
     "permissions": "0600", "defer": True},
]}


def test_deferred_entries_wait_for_their_owner(target):
    result, _ = run(target, "write_files_deferred", CFG, stage="final")
    assert result.status == "failed" and "write_files[1] (/home/alice/.config/app.toml)" in result.reason
    assert "defer: true" not in result.reason  # the hint is for the early module only
    with open(target.path("/etc/passwd"), "a") as handle:
        handle.write("alice:x:1001:1001::/home/alice:/bin/sh\n")
    with open(target.path("/etc/group"), "a") as handle:
        handle.write("alice:x:1001:\n")
    result, _ = run(target, "write_files_deferred", CFG, stage="final")
    assert result.status == "ok", result.reason
    info = os.stat(target.path("/home/alice/.config/app.toml"))
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (1001, 1001, 0o600)
    assert not target.exists("/etc/early")  # not deferred: write_files' job
