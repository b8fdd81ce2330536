"""write_files_deferred: only the entries marked defer: true, in the final stage (after users exist)."""

from __future__ import annotations

import os

import pytest

from tests.agent.modules.module_support import disk_full_at, run

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


@pytest.mark.root
def test_no_deferred_file_goes_into_the_home_of_a_user_left_half_made(chroot, monkeypatch):
    """users_groups' useradd cut short by a full disk, and the removal after it refused too (userdel cannot
    take /etc/passwd's lock on a full disk): the user exists, half made. A deferred file of the user's is
    not written into that home (the next run of users_groups removes it with the home and makes it
    again): it fails, naming why, and is written once the user is whole (the full-disk fault suite lost
    it: write_files_deferred was recorded done and the file gone)."""
    users = {"users": [{"name": "kim", "shell": "/bin/bash"}]}
    deferred = {"write_files": [{"path": "/home/kim/later.txt", "content": "later\n", "owner": "kim:kim",
                                 "defer": True}]}
    lock = chroot.path("/etc/passwd.lock")

    def locked() -> None:  # a live process's lock: userdel gives up at once
        with open(lock, "w") as handle:
            handle.write(f"{os.getpid()}\n")

    with monkeypatch.context() as patched:
        disk_full_at(patched, "/home/kim/.profile", before=locked)
        result, _ = run(chroot, "users_groups", users)
    assert result.status == "failed" and "made again at the next run" in result.reason, result.reason
    assert chroot.user_entry("kim") is not None  # half made
    later, _ = run(chroot, "write_files_deferred", deferred, stage="final")
    assert later.status == "failed", later.reason
    assert "its owner 'kim' was left half made by users_groups" in later.reason, later.reason
    assert not os.path.exists(chroot.path("/home/kim/later.txt"))

    os.unlink(lock)                                           # the disk freed: the next boot
    result, _ = run(chroot, "users_groups", users)
    assert result.status == "ok", result.reason
    later, _ = run(chroot, "write_files_deferred", deferred, stage="final")
    assert later.status == "ok", later.reason
    info = os.stat(chroot.path("/home/kim/later.txt"))
    assert info.st_uid == int(chroot.user_entry("kim")[2])
