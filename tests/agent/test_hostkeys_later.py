"""The helper that installs a host key generated in the background (RSA) once it lands: the key
in place with its mode, the staging area gone, and sshd reloaded only where OpenSSH needs it."""

from __future__ import annotations

import os
import stat
import subprocess

from cloudseed.agent.hostkeys import finish_later_script


def _run_helper(tmp_path, sessions: tuple[str, ...]) -> tuple[str, list[str]]:
    staging, etc, bin_dir = tmp_path / "staging", tmp_path / "etc", tmp_path / "bin"
    for d in (staging, etc, bin_dir):
        d.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(staging / "ssh_host_rsa_key")],
                   check=True)  # the type does not matter to the helper: a finished pair
    (staging / "rsa.pid").write_text("999999\n")
    calls = tmp_path / "systemctl.calls"
    (bin_dir / "systemctl").write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\n")
    os.chmod(bin_dir / "systemctl", 0o755)
    pending = tmp_path / "host-key-rsa.pending"  # the mark the next boot would resume from
    pending.write_text("999999\n")
    script = finish_later_script("rsa", 999999, None, staging=str(staging), final=str(etc / "ssh_host_rsa_key"),
                                 sessions=sessions, pending=str(pending))
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    subprocess.run(["/bin/sh", "-c", script], check=True, env=env, timeout=30)
    key = etc / "ssh_host_rsa_key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and (etc / "ssh_host_rsa_key.pub").exists()
    assert not staging.exists(), "the staging area is left"
    assert not pending.exists(), "the key is in place but still marked pending"
    return str(key), calls.read_text().splitlines() if calls.exists() else []


def test_openssh_before_9_8_serves_the_new_key_without_a_reload(tmp_path):
    """Deliberately unlike a plain reload: OpenSSH 9.2 (Debian 12) loads the host keys again in
    each connection's re-executed process, so the key is served at once; a reload would drop the
    logins arriving while sshd re-executes (seen as "Connection reset" in the VM tests)."""
    _, calls = _run_helper(tmp_path, sessions=(str(tmp_path / "no-sshd-session"),))
    assert calls == []


def test_openssh_9_8_and_later_is_reloaded_once(tmp_path):
    session = tmp_path / "sshd-session"
    session.write_text("")
    _, calls = _run_helper(tmp_path, sessions=(str(tmp_path / "elsewhere"), str(session), str(session)))
    assert calls == ["reload-or-try-restart ssh.service"]


def test_the_script_names_the_distributions_sshd_session_paths():
    script = finish_later_script("rsa", 1, None)
    assert "/usr/lib/openssh/sshd-session" in script and "/usr/libexec/openssh/sshd-session" in script
