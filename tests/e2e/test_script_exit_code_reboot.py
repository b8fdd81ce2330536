"""A real VM reboots when a runcmd script exits 1001, and the boot goes on after it (``CLOUDSEED_E2E=all``).

One VM, one power-on: the agent's final stage stops for the reboot, the guest restarts by itself
(the lab's qemu restarts a guest that reboots), and the boot after the reboot finishes: the script
is not run again, bootcmd ran on both boots, the status is done. Read back from the guest's disk
and its console.
"""

from __future__ import annotations

import pytest

from tests.e2e.guest import read_disk, seed_boot, spec

USER_DATA = b"""#cloud-config
bootcmd:
  - echo boot >> /var/tmp/e2e-boots.log
runcmd:
  - echo run >> /var/tmp/e2e-1001.log
  - exit 1001
"""


@pytest.mark.e2e_extra
def test_exit_1001_reboots_the_vm_once_and_the_boot_finishes_after_it(lab, ssh_key, tmp_path):
    instance = spec(ssh_key[1], instance_id="iid-e2e-1001", data=USER_DATA)
    result = seed_boot(lab, str(tmp_path), "nocloud", "iso9660", instance)
    with open(result.console_log, errors="replace") as handle:
        console = handle.read()
    stopped = console.find("stage final stopped for a reboot")
    assert stopped >= 0, console[-3000:]
    assert "exited 233 (1001: reboot now, done)" in console[stopped:stopped + 300]
    restarted = console.find("reboot: Restarting system", stopped)
    assert restarted > stopped, "the guest did not reboot: " + console[stopped:stopped + 3000]
    assert console.find("stage final start", restarted) > restarted, "no final stage after the reboot"
    assert not result.timed_out, "the boot after the reboot did not finish: " + console[-3000:]
    status = result.status or {}
    assert status.get("status") == "done" and status.get("errors") == [], status
    with read_disk(result) as disk:
        assert disk.text("/var/tmp/e2e-boots.log") == "boot\nboot\n"
        assert disk.text("/var/tmp/e2e-1001.log") == "run\n"  # not run again after the reboot
