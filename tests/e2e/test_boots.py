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

import pytest

from tests.e2e.guest import BOOT_TIMEOUT, WAIT_RSA, assert_provisioned, read_disk, seed_boot, spec, ssh, user_data

# per-boot work the reboot must still do (issue 30): a per-boot script, /etc/hosts rendered again
# (the first boot's deferred write leaves a stale line in it), a mount the fstab keeps after the
# network stage; growpart and resizefs when the disk has grown between the boots
PER_BOOT_FILES = """\
  - path: /var/lib/cloud/scripts/per-boot/e2e.sh
    permissions: '0755'
    content: |
      #!/bin/sh
      echo per-boot >> /var/tmp/e2e-perboot.log
  - path: /etc/hosts
    append: true
    defer: true
    content: "10.9.9.9 stale-e2e-entry\\n"
"""
PER_BOOT_KEYS = "mounts:\n  - [tmpfs, /mnt/e2e, tmpfs]\n"


def _booted(result) -> None:
    assert not result.timed_out, f"agent did not finish; console: {result.console_log}"
    assert result.agent_done_at is not None, f"no final marker on the console: {result.console_log}"


class NoCloudMachine:
    """One NoCloud ISO instance whose disk is reused by the reboot and new-instance tests."""

    def __init__(self, lab, workdir: str, public_key: str):
        self.lab, self.workdir, self.public_key = lab, workdir, public_key
        self.first = seed_boot(lab, workdir, "nocloud", "iso9660", self.spec(), keep=True)

    def spec(self):
        return spec(self.public_key, data=user_data(self.public_key, extra_files=PER_BOOT_FILES,
                                                    extra=PER_BOOT_KEYS))

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
    proc = ssh(nocloud.first, ssh_key[0], "tester", WAIT_RSA)
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
               "cloudseed status --wait --format json; echo ===; ls /run/cloudseed/gate; echo ===; "
               "systemctl show -p WantedBy --value cloudseed.target; "
               "systemctl show -p DropInPaths --value multi-user.target")
    proc = ssh(nocloud.first, ssh_key[0], "tester", command)
    assert proc.returncode == 0, proc.stderr
    shown, status_text, gate, switch = proc.stdout.split("===\n")
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
                                    "network.go", "pid", "wake"]
    # the generator switched the agent on with multi-user.target's drop-in (no wants link)
    wanted_by, dropins = switch.splitlines()
    assert "multi-user.target" in wanted_by.split(), switch
    assert "/run/systemd/generator/multi-user.target.d/50-cloudseed.conf" in dropins.split(), switch


def test_nocloud_iso_provisions_the_instance(nocloud):
    _booted(nocloud.first)
    nocloud.stop()
    status = nocloud.first.status or {}
    assert status.get("datasource", "").lower().startswith("nocloud")
    assert status.get("errors") == []
    with read_disk(nocloud.first) as disk:
        assert_provisioned(disk, nocloud.public_key)
        assert disk.stat("/etc/hostname").mode & 0o777 == 0o644  # as cloud-init writes it (the image has 0755)
        assert disk.text("/var/tmp/e2e-perboot.log") == "per-boot\n"
        assert "stale-e2e-entry" in disk.text("/etc/hosts")  # the deferred write, after update_etc_hosts
        # the users were made without running useradd (distros/_account_files), as the image is plainly simple
        log = disk.text("/var/log/cloudseed.log") or ""
        assert "user tester made by writing the account files" in log and "run as a command" not in log, log[-3000:]
        # what the next boot's generator reads: this instance, its seed, nothing for sshd in its boot work
        record = disk.text("/var/lib/cloudseed/data/reboot-order")
        assert "instance_id=iid-e2e-0001\n" in record and "sshd=free\n" in record, record
        assert "identity=seed NoCloud iso9660," in record, record


SHOW = ("-p Id -p FragmentPath -p After -p ConditionResult -p ActiveState -p InactiveExitTimestampMonotonic "
        "-p ActiveEnterTimestampMonotonic")
REBOOT_UNITS = ("cloudseed-local.service", "networking.service", "cloudseed-network.service", "ssh.service",
                "systemd-user-sessions.service", "network-online.target", "multi-user.target",
                "cloudseed-config.service", "cloudseed-final.service", "cloudseed-before-sshd.target",
                "cloudseed-hold-sshd.service", "mnt-e2e.mount")


def _shown(text: str) -> dict[str, dict[str, str]]:
    units: dict[str, dict[str, str]] = {}
    for block in text.strip().split("\n\n"):
        fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        units[fields["Id"]] = fields
    return units


def _at(units: dict, unit: str, field: str) -> int:
    return int(units[unit][field])


def _guest_view(result, key: str, extra: str = "") -> tuple[dict, list[str], str]:
    """systemd's view of the boot's units, /run/cloudseed's files and ``extra``'s output, over SSH."""
    command = (f"systemctl show {SHOW} {' '.join(REBOOT_UNITS)}; echo ===; ls /run/cloudseed; echo ===; "
               f"{extra or 'true'}")
    proc = ssh(result, key, "tester", command)
    assert proc.returncode == 0, proc.stderr
    shown, files, rest = proc.stdout.split("===\n")
    return _shown(shown), files.split(), rest


def test_reboot_of_the_unchanged_instance_starts_sshd_as_without_an_agent(nocloud, lab, ssh_key):
    """The reboot of an unchanged instance (issue 30): sshd and logins do not wait for the network
    stage (the generator replaced cloudseed-before-sshd.target, the local stage confirmed), and
    every per-boot module keeps its effect and its own place: bootcmd, update_etc_hosts,
    growpart/resizefs (the disk grew between the boots), the per-boot script, the final message,
    the agent's mount after the network stage, network-online.target after the network stage."""
    nocloud.stop()
    subprocess.run(["qemu-img", "resize", "-q", nocloud.first.overlay, "5G"], check=True)
    again = seed_boot(lab, nocloud.workdir, "nocloud", "iso9660", nocloud.spec(), overlay=nocloud.first.overlay,
                      keep=True)
    try:
        _booted(again)  # the final message (final_message, per boot) was on the console
        sizes = ("cat /sys/class/block/vda/size /sys/class/block/vda1/start /sys/class/block/vda1/size; "
                 "df -B1 --output=size / | tail -1; findmnt -n -o FSTYPE /mnt/e2e; hostname")
        units, files, rest = _guest_view(again, ssh_key[0], sizes)
    finally:
        again.vm.stop()
    # sshd's order as without an agent: nothing of cloudseed's between networking and sshd
    target = units["cloudseed-before-sshd.target"]
    assert target["FragmentPath"] == "/run/systemd/generator/cloudseed-before-sshd.target", target
    for unit in ("ssh.service", "systemd-user-sessions.service"):
        after = units[unit]["After"].split()
        assert "cloudseed-network.service" not in after and "cloudseed-before-sshd.target" not in after, after
    assert units["cloudseed-hold-sshd.service"]["ConditionResult"] == "no"
    assert "sshd-early" in files and "sshd-early.confirmed" in files, files
    # the per-boot work keeps its places
    assert _at(units, "cloudseed-local.service", "ActiveEnterTimestampMonotonic") <= \
        _at(units, "networking.service", "InactiveExitTimestampMonotonic"), units
    network_done = _at(units, "cloudseed-network.service", "ActiveEnterTimestampMonotonic")
    assert network_done <= _at(units, "network-online.target", "ActiveEnterTimestampMonotonic"), units
    assert network_done <= _at(units, "cloudseed-config.service", "InactiveExitTimestampMonotonic"), units
    assert _at(units, "cloudseed-final.service", "InactiveExitTimestampMonotonic") >= \
        _at(units, "multi-user.target", "ActiveEnterTimestampMonotonic"), units
    mount = units["mnt-e2e.mount"]
    assert "cloudseed-network.service" in mount["After"].split() and mount["ActiveState"] == "active", mount
    assert _at(units, "mnt-e2e.mount", "ActiveEnterTimestampMonotonic") >= network_done
    disk_sectors, start, length, fs_bytes, fstype, hostname = rest.split()
    assert fstype == "tmpfs" and hostname == "e2e-host"
    assert int(start) + int(length) >= int(disk_sectors) - 2048, rest  # growpart: the partition fills 5 GiB
    assert int(fs_bytes) > 4.5 * 2**30, rest  # resizefs: so does the filesystem
    with read_disk(again) as disk:
        assert disk.text("/var/tmp/e2e-bootcmd.log") == "boot\nboot\n"  # bootcmd: every boot
        assert disk.text("/var/tmp/e2e-runcmd.log") == "run\n"  # runcmd: once per instance
        assert disk.text("/var/tmp/e2e-perboot.log") == "per-boot\nper-boot\n"  # scripts_per_boot
        hosts = disk.text("/etc/hosts")
        assert "stale-e2e-entry" not in hosts and "e2e-host.example.test" in hosts  # update_etc_hosts
        assert disk.text("/etc/hostname").strip() == "e2e-host"


@pytest.mark.e2e_extra
def test_new_instance_id_reruns_per_instance_work(nocloud, lab, ssh_key):
    """A new instance-id on the same disk: our seeds' ISO 9660 UUID is the same for every seed (a
    fixed date), so the generator cannot tell and lets sshd go early; the local stage reads the new
    instance-id and does not confirm, and cloudseed-hold-sshd.service keeps sshd after the network stage."""
    nocloud.stop()
    fresh = spec(nocloud.public_key, instance_id="iid-e2e-0002", marker="second",
                 data=user_data(nocloud.public_key, marker="second", extra="sshd_early_on_reboot: false\n"))
    result = seed_boot(lab, nocloud.workdir, "nocloud", "iso9660", fresh, overlay=nocloud.first.overlay, keep=True)
    try:
        _booted(result)
        units, files, _ = _guest_view(result, ssh_key[0])
    finally:
        result.vm.stop()
    assert "sshd-early.refused" in files and "sshd-early.confirmed" not in files, files
    hold = units["cloudseed-hold-sshd.service"]
    assert hold["ConditionResult"] == "yes" and hold["ActiveState"] == "active", hold
    network_done = _at(units, "cloudseed-network.service", "ActiveEnterTimestampMonotonic")
    assert network_done <= _at(units, "ssh.service", "InactiveExitTimestampMonotonic"), units
    assert network_done <= _at(units, "systemd-user-sessions.service", "InactiveExitTimestampMonotonic"), units
    with read_disk(result) as disk:
        assert disk.text("/etc/hostname").strip() == "second-host"
        assert disk.text("/etc/e2e/one.txt") == "second one\n"
        assert disk.text("/var/tmp/e2e-runcmd.log").count("run") >= 2  # per-instance work ran again
        assert "sshd=wait: sshd_early_on_reboot is false" in disk.text("/var/lib/cloudseed/data/reboot-order")
    nocloud.second = fresh


@pytest.mark.e2e_extra
def test_reboot_with_sshd_early_on_reboot_false_keeps_sshd_after_the_network_stage(nocloud, lab, ssh_key):
    """The second instance's user-data says ``sshd_early_on_reboot: false``: its reboot keeps the
    units' order (the record says so; the generator writes no empty target)."""
    fresh = getattr(nocloud, "second", None)
    if fresh is None:
        pytest.skip("needs the new-instance boot before it")
    result = seed_boot(lab, nocloud.workdir, "nocloud", "iso9660", fresh, overlay=nocloud.first.overlay, keep=True)
    try:
        _booted(result)
        units, files, waits = _guest_view(result, ssh_key[0], "cat /run/cloudseed/sshd-waits")
    finally:
        result.vm.stop()
    assert "sshd-early" not in files and "sshd-waits" in files, files
    assert waits.strip() == "sshd reads what this boot's work does: sshd_early_on_reboot is false"
    target = units["cloudseed-before-sshd.target"]
    assert target["FragmentPath"].endswith("/systemd/system/cloudseed-before-sshd.target"), target
    assert "cloudseed-before-sshd.target" in units["ssh.service"]["After"].split()
    assert units["cloudseed-hold-sshd.service"]["ConditionResult"] == "no"
    network_done = _at(units, "cloudseed-network.service", "ActiveEnterTimestampMonotonic")
    assert network_done <= _at(units, "ssh.service", "InactiveExitTimestampMonotonic"), units


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
    from cloudseed.lab.boots.metadata import MetadataServer
    from cloudseed.lab.boots.session import run_boot

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
    result = seed_boot(lab, str(tmp_path), "nocloud", "iso9660", broken, keep=True)
    try:
        _booted(result)
        # the network stage reported an error and its unit failed: the RSA host key made in the
        # background is still installed (systemd stops only the stage's main process)
        proc = ssh(result, ssh_key[0], "debian", WAIT_RSA)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["600", "root", "ssh-rsa", "staging-gone"], proc.stdout
    finally:
        result.vm.stop()
    status = result.status or {}
    messages = " ".join(str(e) for e in status.get("errors", []) + status.get("warnings", []))
    assert "user-data" in messages or "cloud-config" in messages, status
    assert "line" in messages, status
    with read_disk(result) as disk:
        assert disk.text("/etc/hostname").strip() == "e2e-host"  # meta-data still applied
