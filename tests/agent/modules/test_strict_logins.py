"""Strict mode's refused logins, seen by a real sshd: Debian bookworm's openssh-server and PAM stack.

The agent boots a private overlay of the cached bookworm tree (``debian_root``) with strict mode,
``allow_root_login: true``, a user and root authorised with one key, and a ``runcmd`` that fails
in the final stage, after sshd would be up. Then the tree's own ``/usr/sbin/sshd`` runs chrooted
in a network namespace of its own (``netns``) and the host's ssh client logs in over
its loopback: the user is refused with the text the agent left in ``/run/nologin`` (pam_nologin in
Debian's ``/etc/pam.d/sshd``), root's key login works (what the operator uses to see why), and
once the file is gone the same user logs in: the refusal is the agent's, not a broken key.
Here beside the module tests for their bookworm tree (``conftest.py``), shared with them; the
rest of strict mode is tested in ``tests/agent/test_strict.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from cloudseed.agent.boot.stages import Agent

SYSTEM = """\
network: {config: disabled}
datasource_list: [NoCloud]
disable_root: false
ssh_genkeytypes: [ed25519]
strict: {allow_root_login: true}
cloud_init_modules: [users_groups, ssh]
cloud_config_modules: [runcmd]
cloud_final_modules: [scripts_user]
"""


def _client(namespace: str, key: str, user: str, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", namespace, "ssh", "-i", key, "-o", "BatchMode=yes",
                           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                           "-o", "ConnectTimeout=10", f"{user}@127.0.0.1", command],
                          capture_output=True, text=True, timeout=60)


def _sshd(namespace: str, tree: str) -> subprocess.Popen:
    """The tree's sshd on port 22 of the namespace's loopback (its mounts die with it)."""
    script = (f"mount -t proc proc {tree}/proc && mount --rbind /dev {tree}/dev && "
              f"exec chroot {tree} /usr/sbin/sshd -D -e -o ListenAddress=127.0.0.1")
    sshd = subprocess.Popen(["ip", "netns", "exec", namespace, "sh", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and sshd.poll() is None:
        probe = subprocess.run(["ip", "netns", "exec", namespace, "bash", "-c",
                                "exec 3<>/dev/tcp/127.0.0.1/22 && head -c 4 <&3"], capture_output=True, timeout=10)
        if probe.stdout.startswith(b"SSH-"):
            return sshd
        time.sleep(0.2)
    sshd.kill()
    raise AssertionError(f"sshd did not start: {sshd.communicate(timeout=10)[0]}")


def test_a_late_strict_failure_refuses_user_logins_in_sshd_and_keeps_roots(debian_root, netns, tmp_path):
    if not shutil.which("ssh"):
        pytest.skip("needs an ssh client (openssh-client)")
    root, namespace = debian_root, netns
    key = str(tmp_path / "key")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    with open(key + ".pub") as handle:
        public = handle.read().strip()
    root.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg", SYSTEM)
    root.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-strict-sshd\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data",
               f"#cloud-config\nusers: [{{name: tester, shell: /bin/bash, ssh_authorized_keys: ['{public}']}}]\n"
               f"ssh_authorized_keys: ['{public}']\nruncmd: ['echo the service did not start >&2; exit 7']\n")
    agent = Agent(root)
    assert agent.run_all() == 1
    nologin = root.read_text("/run/nologin")
    assert "the final stage ended with 1 error(s)" in nologin and "scripts_user" in nologin, nologin
    assert root.exists("/etc/ssh/ssh_host_ed25519_key") and "tester:" in root.read_text("/etc/passwd")
    os.makedirs(root.path("/run/sshd"), mode=0o755, exist_ok=True)

    sshd = _sshd(namespace, root.top)
    try:
        refused = _client(namespace, key, "tester", "true")
        assert refused.returncode == 255, refused
        assert "This instance failed to provision" in refused.stderr, refused.stderr  # the file's text
        assert "scripts_user" in refused.stderr
        operator = _client(namespace, key, "root", "cat /run/nologin")
        assert operator.returncode == 0, operator.stderr
        assert operator.stdout == nologin
        root.remove("/run/nologin")
        allowed = _client(namespace, key, "tester", "id -un")
        assert allowed.returncode == 0 and allowed.stdout.strip() == "tester", allowed
    finally:
        sshd.kill()
        sshd.wait(timeout=10)
