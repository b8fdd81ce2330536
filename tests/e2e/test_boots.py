"""Real VM boots of the cloudseed image, each checked from outside the guest.

Results are read from the guest disk after power-off (qemu-img convert + debugfs), not from
anything the guest says; the console is used only for timing and the agent's own report.
The default (ci) set: NoCloud ISO (+ SSH login, a reboot, a new instance-id on the same disk),
config drive ISO, OpenStack metadata service. ``CLOUDSEED_E2E=all`` adds the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from guest import BOOT_TIMEOUT, assert_provisioned, read_disk, seed_boot, spec, ssh  # noqa: E402


def _booted(result) -> None:
    assert not result.timed_out, f"agent did not finish; console: {result.console_log}"
    assert result.agent_done_at is not None, f"no final marker on the console: {result.console_log}"


class NoCloudMachine:
    """One NoCloud ISO instance whose disk is reused by the reboot and new-instance tests."""

    def __init__(self, lab, workdir: str, public_key: str):
        self.lab, self.workdir, self.public_key = lab, workdir, public_key
        self.first = seed_boot(lab, workdir, "nocloud", "iso9660", spec(public_key), keep=True)

    def stop(self) -> None:
        if self.first.vm and self.first.vm.running():
            self.first.vm.stop()


@pytest.fixture(scope="module")
def nocloud(lab, ssh_key, tmp_path_factory):
    machine = NoCloudMachine(lab, str(tmp_path_factory.mktemp("nocloud")), ssh_key[1])
    yield machine
    machine.stop()


def test_nocloud_iso_ssh_login_with_injected_key(nocloud, ssh_key):
    _booted(nocloud.first)
    ssh_ready = nocloud.first.ssh_ready_at
    warnings = (nocloud.first.status or {}).get("warnings")
    assert ssh_ready is not None, f"sshd never answered on the forwarded port; agent warnings: {warnings}"
    proc = ssh(nocloud.first, ssh_key[0], "tester", "id -un; hostname; sudo -n true && echo sudo-ok")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["tester", "e2e-host", "sudo-ok"]
    # sshd started with the fast key types; the RSA key is generated in the background at low
    # priority and installed when ready (then sshd is reloaded), with the staging area removed
    wait_rsa = ("for i in $(seq 100); do sudo test -s /etc/ssh/ssh_host_rsa_key.pub && break; sleep 1; done; "
                "sleep 1; sudo stat -c '%a %U' /etc/ssh/ssh_host_rsa_key; "
                "sudo head -c 8 /etc/ssh/ssh_host_rsa_key.pub; echo; "
                "sudo test -e /run/cloudseed/hostkeys && echo staging-left || echo staging-gone")
    proc = ssh(nocloud.first, ssh_key[0], "tester", wait_rsa)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["600", "root", "ssh-rsa", "staging-gone"], proc.stdout
    scan = subprocess.run(["ssh-keyscan", "-t", "rsa", "-p", str(nocloud.first.vm.ssh_port), "127.0.0.1"],
                          capture_output=True, text=True, timeout=60)
    assert " ssh-rsa " in scan.stdout, f"sshd does not offer the new RSA key: {scan.stdout} {scan.stderr}"


ORDER_UNITS = ("cloudseed-local.service", "networking.service", "cloudseed-network.service", "ssh.service",
               "sysinit.target", "multi-user.target", "cloudseed-final.service")


def test_stages_keep_their_places_in_the_boot_in_one_process(nocloud, ssh_key):
    """Network config before networking, users and keys before sshd, final after multi-user.target,
    sysinit.target not held by the network stage, `status --wait` done; one agent process."""
    _booted(nocloud.first)
    props = "-p Id -p InactiveExitTimestampMonotonic -p ActiveEnterTimestampMonotonic"
    command = (f"systemctl show {props} {' '.join(ORDER_UNITS)}; echo ===; "
               "cloudseed status --wait --format json; echo ===; ls /run/cloudseed/gate")
    proc = ssh(nocloud.first, ssh_key[0], "tester", command)
    assert proc.returncode == 0, proc.stderr
    shown, status_text, gate = proc.stdout.split("===\n")
    units: dict[str, dict[str, int]] = {}
    for block in shown.strip().split("\n\n"):
        fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        units[fields["Id"]] = {k: int(v) for k, v in fields.items() if k != "Id" and v.isdigit()}
    started = {u: units[u]["InactiveExitTimestampMonotonic"] for u in units}
    active = {u: units[u]["ActiveEnterTimestampMonotonic"] for u in units}
    # the local stage's process is ready (local stage done) before networking starts
    assert active["cloudseed-local.service"] <= started["networking.service"], units
    # users, keys and hostname before sshd
    assert active["cloudseed-network.service"] <= started["ssh.service"], units
    # the final stage after multi-user.target
    assert started["cloudseed-final.service"] >= active["multi-user.target"], units
    # nothing waits for the network stage to reach sysinit.target
    assert active["sysinit.target"] < active["cloudseed-network.service"], units
    assert json.loads(status_text)["status"] == "done"
    # the later stages were handed to the boot's one agent process
    assert sorted(gate.split()) == ["config.done", "config.go", "final.done", "final.go", "network.done",
                                    "network.go", "pid"]


def test_nocloud_iso_provisions_the_instance(nocloud):
    _booted(nocloud.first)
    nocloud.stop()
    status = nocloud.first.status or {}
    assert status.get("datasource", "").lower().startswith("nocloud")
    assert status.get("errors") == []
    with read_disk(nocloud.first) as disk:
        assert_provisioned(disk, nocloud.public_key)
        assert disk.stat("/etc/hostname").mode & 0o777 == 0o644  # as cloud-init writes it (the image has 0755)


def test_reboot_reruns_only_per_boot_work(nocloud, lab):
    nocloud.stop()
    again = seed_boot(lab, nocloud.workdir, "nocloud", "iso9660", spec(nocloud.public_key),
                      overlay=nocloud.first.overlay)
    _booted(again)
    with read_disk(again) as disk:
        assert disk.text("/var/tmp/e2e-bootcmd.log") == "boot\nboot\n"  # bootcmd: every boot
        assert disk.text("/var/tmp/e2e-runcmd.log") == "run\n"  # runcmd: once per instance
        assert disk.text("/etc/hostname").strip() == "e2e-host"


@pytest.mark.e2e_extra
def test_new_instance_id_reruns_per_instance_work(nocloud, lab):
    nocloud.stop()
    fresh = spec(nocloud.public_key, instance_id="iid-e2e-0002", marker="second")
    result = seed_boot(lab, nocloud.workdir, "nocloud", "iso9660", fresh, overlay=nocloud.first.overlay)
    _booted(result)
    with read_disk(result) as disk:
        assert disk.text("/etc/hostname").strip() == "second-host"
        assert disk.text("/etc/e2e/one.txt") == "second one\n"
        assert disk.text("/var/tmp/e2e-runcmd.log").count("run") >= 2  # per-instance work ran again


def test_config_drive_iso(lab, ssh_key, tmp_path):
    result = seed_boot(lab, str(tmp_path), "configdrive", "iso9660", spec(ssh_key[1]))
    _booted(result)
    assert (result.status or {}).get("datasource", "").lower().startswith("configdrive")
    with read_disk(result) as disk:
        assert_provisioned(disk, ssh_key[1])


@pytest.mark.e2e_extra
@pytest.mark.parametrize("kind", ["nocloud", "configdrive"])
def test_vfat_seeds(lab, ssh_key, tmp_path, kind):
    result = seed_boot(lab, str(tmp_path), kind, "vfat", spec(ssh_key[1]))
    _booted(result)
    with read_disk(result) as disk:
        assert_provisioned(disk, ssh_key[1])


def _metadata_boot(lab, tmp_path, instance, platform, imds_tokens=None):
    from cloudseed.lab.metadata import MetadataServer
    from cloudseed.lab.session import run_boot

    image, accel, reason = lab
    with MetadataServer(instance, str(tmp_path), imds_tokens=imds_tokens) as server:
        result = run_boot(image, str(tmp_path), accel=accel, accel_reason=reason,
                          metadata_port=server.port, platform=platform, timeout=BOOT_TIMEOUT)
        result.metadata_requests = server.request_count()
    return result


def test_openstack_metadata_service(lab, ssh_key, tmp_path):
    result = _metadata_boot(lab, tmp_path, spec(ssh_key[1]), "openstack")
    _booted(result)
    assert (result.status or {}).get("datasource", "").lower().startswith("openstack")
    assert result.metadata_requests and result.metadata_requests > 0
    with read_disk(result) as disk:
        assert_provisioned(disk, ssh_key[1])


@pytest.mark.e2e_extra
def test_ec2_metadata_service_with_imdsv2_required(lab, ssh_key, tmp_path):
    result = _metadata_boot(lab, tmp_path, spec(ssh_key[1]), "ec2", imds_tokens="required")
    _booted(result)
    assert (result.status or {}).get("datasource", "").lower().startswith("ec2")
    with open(os.path.join(str(tmp_path), "metadata-access.log")) as handle:
        assert "/latest/api/token" in handle.read()  # it asked for a session token
    with read_disk(result) as disk:
        assert_provisioned(disk, ssh_key[1])


@pytest.mark.e2e_extra
def test_invalid_user_data_still_boots_with_a_clear_error(lab, ssh_key, tmp_path):
    broken = spec(ssh_key[1], data=b"#cloud-config\nruncmd: [unclosed\nwrite_files: 3\n")
    result = seed_boot(lab, str(tmp_path), "nocloud", "iso9660", broken)
    _booted(result)
    status = result.status or {}
    messages = " ".join(str(e) for e in status.get("errors", []) + status.get("warnings", []))
    assert "user-data" in messages or "cloud-config" in messages, status
    assert "line" in messages, status
    with read_disk(result) as disk:
        assert disk.text("/etc/hostname").strip() == "e2e-host"  # meta-data still applied
