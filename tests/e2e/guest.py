"""Helpers for the e2e boots: the user-data they share, booting, and reading the guest disk back."""

from __future__ import annotations

import os
import subprocess
from typing import Optional

from cloudseed.lab.boots.session import BootResult, run_boot
from cloudseed.lab.images.readback import GuestDisk
from cloudseed.provider.seeds.build import build_seed
from cloudseed.provider.seeds.spec import InstanceSpec, SshKey

BOOT_TIMEOUT = float(os.environ.get("CLOUDSEED_E2E_TIMEOUT", "480"))


# in the guest: wait for the RSA host key made in the background, then its mode, owner, type and
# whether the staging area is gone
WAIT_RSA = ("for i in $(seq 100); do sudo test -s /etc/ssh/ssh_host_rsa_key.pub && break; sleep 1; done; "
            "sleep 1; sudo stat -c '%a %U' /etc/ssh/ssh_host_rsa_key; "
            "sudo head -c 8 /etc/ssh/ssh_host_rsa_key.pub; echo; "
            "sudo test -e /run/cloudseed/hostkeys && echo staging-left || echo staging-gone")


def user_data(public_key: str, marker: str = "e2e", extra_files: str = "", extra: str = "") -> bytes:
    """The shared user-data; ``extra_files`` are more ``write_files`` entries, ``extra`` more keys."""
    return f"""#cloud-config
hostname: {marker}-host
fqdn: {marker}-host.example.test
manage_etc_hosts: true
users:
  - default
  - name: tester
    sudo: ALL=(ALL) NOPASSWD:ALL
    shell: /bin/bash
    ssh_authorized_keys:
      - {public_key}
write_files:
  - path: /etc/e2e/one.txt
    content: "{marker} one\\n"
  - path: /etc/e2e/secret.txt
    content: "{marker} secret\\n"
    permissions: '0600'
{extra_files}bootcmd:
  - echo boot >> /var/tmp/e2e-bootcmd.log
runcmd:
  - echo run >> /var/tmp/e2e-runcmd.log
{extra}""".encode()


def spec(public_key: str, instance_id: str = "iid-e2e-0001", marker: str = "e2e",
         data: Optional[bytes] = None) -> InstanceSpec:
    return InstanceSpec(instance_id=instance_id, hostname=f"{marker}-host", name=f"{marker}-host",
                        ssh_keys=[SshKey(name="e2e", type="ed25519", data=public_key)],
                        user_data=user_data(public_key, marker) if data is None else data)


def seed_boot(lab, workdir: str, kind: str, fs: str, instance: InstanceSpec,
              overlay: Optional[str] = None, keep: bool = False) -> BootResult:
    image, accel, reason = lab
    os.makedirs(workdir, exist_ok=True)
    seed = os.path.join(workdir, f"seed-{instance.instance_id}.{fs}")
    build_seed(kind, fs, instance, seed)
    return run_boot(image, workdir, accel=accel, accel_reason=reason, seeds=[seed], overlay=overlay,
                    timeout=BOOT_TIMEOUT, keep=keep)


def read_disk(result: BootResult) -> GuestDisk:
    assert not (result.vm and result.vm.running()), "stop the VM before reading its disk"
    return GuestDisk.from_overlay(result.overlay)


def ssh(result: BootResult, key: str, user: str, command: str) -> subprocess.CompletedProcess:
    assert result.vm is not None
    return subprocess.run(["ssh", "-i", key, "-p", str(result.vm.ssh_port), "-o", "BatchMode=yes",
                           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                           "-o", "ConnectTimeout=20", f"{user}@127.0.0.1", command],
                          capture_output=True, text=True, timeout=120)


def assert_provisioned(disk: GuestDisk, public_key: str, marker: str = "e2e") -> None:
    """What the shared user-data must have done, read from the guest's disk."""
    assert disk.text("/etc/hostname").strip() == f"{marker}-host"
    hosts = disk.text("/etc/hosts")
    assert f"{marker}-host.example.test" in hosts
    assert disk.text("/etc/e2e/one.txt") == f"{marker} one\n"
    secret = disk.stat("/etc/e2e/secret.txt")
    assert secret is not None and secret.mode & 0o777 == 0o600
    assert "tester:" in disk.text("/etc/passwd")
    authorized = disk.text("/home/tester/.ssh/authorized_keys") or ""
    assert public_key in authorized
    assert disk.text("/var/tmp/e2e-bootcmd.log") == "boot\n"
    assert disk.text("/var/tmp/e2e-runcmd.log") == "run\n"
    keys = disk.listdir("/etc/ssh")
    assert "ssh_host_ed25519_key" in keys
