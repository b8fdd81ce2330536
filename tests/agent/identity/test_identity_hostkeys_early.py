"""Host keys started early (local stage) are adopted by the ssh module instead of being generated again."""

from __future__ import annotations

import os
import stat
import subprocess
import time

import pytest
from identity_support import run

from cloudseed.agent import hostkeys


def wait_for(root, paths: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not all(root.exists(p) for p in paths):
        assert time.monotonic() < deadline, f"early keys did not appear: {paths}"
        time.sleep(0.1)


@pytest.fixture
def run_on_tmpfs(chroot):
    """The chroot's /run on its own tmpfs, as at boot: staged keys then cross a filesystem boundary."""
    run_dir = chroot.makedirs("/run")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", run_dir]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield chroot
    subprocess.run(["umount", run_dir], check=False)


def test_early_keys_are_adopted_and_staging_is_cleared(run_on_tmpfs):
    chroot = run_on_tmpfs
    for name in chroot.listdir("/etc/ssh"):
        if name.startswith("ssh_host_"):
            chroot.remove(f"/etc/ssh/{name}")
    started = hostkeys.start_early(chroot, ["ed25519", "ecdsa"])
    assert started == ["ed25519", "ecdsa"]
    staged = [f"{hostkeys.STAGING_DIR}/ssh_host_{t}_key.pub" for t in started]
    wait_for(chroot, staged)
    early = {t: chroot.read_text(f"{hostkeys.STAGING_DIR}/ssh_host_{t}_key.pub") for t in started}
    result, _ = run(chroot, "ssh", {"ssh_genkeytypes": ["ed25519", "ecdsa"], "ssh_quiet_keygen": True})
    assert result.status == "ok", result.reason
    for keytype, public in early.items():
        assert chroot.read_text(f"/etc/ssh/ssh_host_{keytype}_key.pub") == public
        mode = stat.S_IMODE(os.stat(chroot.path(f"/etc/ssh/ssh_host_{keytype}_key")).st_mode)
        assert mode in (0o600, 0o640)
    assert not chroot.exists(hostkeys.STAGING_DIR)


def test_types_not_started_early_are_still_generated(chroot):
    for name in chroot.listdir("/etc/ssh"):
        if name.startswith("ssh_host_"):
            chroot.remove(f"/etc/ssh/{name}")
    hostkeys.start_early(chroot, ["ed25519"])
    result, _ = run(chroot, "ssh", {"ssh_genkeytypes": ["ed25519", "ecdsa"], "ssh_quiet_keygen": True})
    assert result.status == "ok", result.reason
    assert chroot.isfile("/etc/ssh/ssh_host_ecdsa_key") and chroot.isfile("/etc/ssh/ssh_host_ed25519_key")


def test_slow_rsa_key_does_not_hold_up_the_boot(run_on_tmpfs):
    """With defer_slow, a still-running early RSA key is installed later by a background helper."""
    chroot = run_on_tmpfs
    for name in chroot.listdir("/etc/ssh"):
        if name.startswith("ssh_host_"):
            chroot.remove(f"/etc/ssh/{name}")
    hostkeys.start_early(chroot, ["rsa", "ed25519"])
    wait_for(chroot, [f"{hostkeys.STAGING_DIR}/ssh_host_ed25519_key.pub"])
    results = {r.keytype: r for r in hostkeys.generate(chroot, ["rsa", "ed25519"], defer_slow=True)}
    assert results["ed25519"].ok and chroot.isfile("/etc/ssh/ssh_host_ed25519_key")
    assert results["rsa"].ok  # adopted if it was already done, otherwise deferred
    wait_for(chroot, ["/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_rsa_key.pub"], timeout=120)
    deadline = time.monotonic() + 30
    while chroot.exists(hostkeys.STAGING_DIR) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not chroot.exists(hostkeys.STAGING_DIR)
    assert stat.S_IMODE(os.stat(chroot.path("/etc/ssh/ssh_host_rsa_key")).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(chroot.path("/etc/ssh/ssh_host_rsa_key.pub")).st_mode) == 0o644
    assert chroot.read_text("/etc/ssh/ssh_host_rsa_key.pub").startswith("ssh-rsa ")


def test_ssh_module_reports_no_error_for_a_deferred_rsa_key(run_on_tmpfs):
    """Regression: a still-running early RSA key is deferred, which is success, not 'generating failed'.

    The early ssh-keygen is replaced by a process we control (a sleep), so the key is always still
    being generated when the module runs; the key files appear in the staging directory afterwards.
    """
    chroot = run_on_tmpfs
    for name in chroot.listdir("/etc/ssh"):
        if name.startswith("ssh_host_"):
            chroot.remove(f"/etc/ssh/{name}")
    chroot.makedirs(hostkeys.STAGING_DIR, mode=0o700)
    busy = subprocess.Popen(["sleep", "3"])
    try:
        chroot.write(f"{hostkeys.STAGING_DIR}/rsa.pid", f"{busy.pid}\n", mode=0o600)
        result, _ = run(chroot, "ssh", {"ssh_genkeytypes": ["rsa", "ed25519"], "ssh_quiet_keygen": True})
        assert result.status == "ok", result.reason
        assert chroot.isfile("/etc/ssh/ssh_host_ed25519_key")
        assert not chroot.exists("/etc/ssh/ssh_host_rsa_key")  # not yet: the helper installs it later
        staged = chroot.path(f"{hostkeys.STAGING_DIR}/ssh_host_rsa_key")
        subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "1024", "-N", "", "-f", staged], check=True)
    finally:
        busy.wait()
    wait_for(chroot, ["/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_rsa_key.pub"], timeout=60)
    assert chroot.read_text("/etc/ssh/ssh_host_rsa_key.pub").startswith("ssh-rsa ")


def test_local_stage_starts_only_fast_key_types_early():
    """RSA is left to the ssh module's low-priority background run unless it is the only type wanted."""
    assert hostkeys.early_types(["rsa", "ecdsa", "ed25519"]) == ["ecdsa", "ed25519"]
    assert hostkeys.early_types(["rsa"]) == ["rsa"]
    assert hostkeys.early_types(["rsa", "dsa", "bogus"]) == ["rsa", "dsa"]
    assert hostkeys.early_types(["ed25519", "ed25519"]) == ["ed25519"]
