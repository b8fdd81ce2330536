"""Read-only directories: what cannot be written fails alone, named by its real path (never a temporary
file's), everything else is still set up, and the boot after the directory is writable again converges.
"""

from __future__ import annotations

import contextlib
import json
import subprocess

from tests.agent.faults import fault_support as fs


@contextlib.contextmanager
def read_only(root, inner: str):
    """``inner`` of ``root`` made read-only (a read-only bind mount over it), writable again on exit."""
    host = root.path(inner)
    subprocess.run(["mount", "--bind", host, host], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", host], check=True)
        yield
    finally:
        subprocess.run(["umount", host], check=True)


def module_results(root) -> dict[str, dict]:
    data = json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]
    return {m["name"]: m for key in ("init", "modules-config", "modules-final") for m in data[key]["modules"]}


def test_a_read_only_sudoers_dir_fails_the_sudo_rules_only(fault_root, clean_boot):
    expected = clean_boot["fingerprint"]
    with read_only(fault_root, "/etc/sudoers.d"):
        fs.new_boot(fault_root)
        proc = fs.agent(fault_root, "boot")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        results = module_results(fault_root)
        failed = {name for name, m in results.items() if m["status"] == "failed"}
        assert failed == {"users_groups"}, results
        reason = results["users_groups"]["reason"]
        assert ("users[0].sudo: cannot write /etc/sudoers.d/90-cloudseed-users: Read-only file system; "
                "no sudo rules installed for fiuser") in reason, reason
        assert "cloudseed-" not in reason.replace("90-cloudseed-users", "")   # no temporary file named
        now = fs.fingerprint(fault_root)
        assert now["sudoers"] is None
        for key in ("passwd", "group", "ops", "locked", "home", "authorized_keys", "deferred"):
            assert now[key] == expected[key], key                       # keys, groups, the rest of the user
    assert fs.boot(fault_root).returncode == 0
    assert fs.fingerprint(fault_root) == expected


def test_a_read_only_ssh_dir_names_the_real_files(fault_root, clean_boot):
    expected = clean_boot["fingerprint"]
    with read_only(fault_root, "/etc/ssh"):
        fs.new_boot(fault_root)
        proc = fs.agent(fault_root, "boot")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        results = module_results(fault_root)
        failed = {name for name, m in results.items() if m["status"] == "failed"}
        assert failed == {"ssh", "set_passwords"}, results
        for name in failed:
            reason = results[name]["reason"]
            assert "Read-only file system: '/etc/ssh/" in reason, reason
            assert ".tmp" not in reason and "cloudseed-1" not in reason, reason
        assert "'/etc/ssh/sshd_config.d/50-cloudseed.conf'" in results["set_passwords"]["reason"]
        now = fs.fingerprint(fault_root)
        for key in ("passwd", "authorized_keys", "sudoers", "hostname", "app.conf", "deferred", "timezone"):
            assert now[key] == expected[key], key
    assert fs.boot(fault_root).returncode == 0
    assert fs.fingerprint(fault_root) == expected


def test_a_read_only_state_dir_is_an_error_that_ends_the_wait(fault_root, clean_boot):
    """Nothing of the agent's own state can be written: the boot says so (the status lives in /run)."""
    fault_root.makedirs("/var/lib/cloudseed")
    with read_only(fault_root, "/var/lib/cloudseed"):
        fs.new_boot(fault_root)
        proc = fs.agent(fault_root, "boot")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        shown = fs.status(fault_root, "--long")
        assert shown.returncode == 1 and "Read-only file system: '/var/lib/cloudseed/" in shown.stdout, shown.stdout
        assert fs.status(fault_root, "--wait", timeout=20).returncode == 1
        # the append waits for a run that can record it: it is never made twice
        assert "not appended now" in shown.stdout
        assert not fault_root.exists("/etc/fault/appended.log")
    assert fs.boot(fault_root).returncode == 0
    assert fs.status(fault_root).returncode == 0
    assert fs.fingerprint(fault_root) == clean_boot["fingerprint"]
