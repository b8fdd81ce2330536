"""The waits Packer and Terraform run, unchanged, against a lab boot (issue 13): ``cloud-init status --wait``
over SSH and a loop on ``/var/lib/cloud/instance/boot-finished`` return when the final stage is done,
``status --wait`` with exit 1 when the boot had an error.

The image carries cloud-init's commands as the package installs them (``cloudseed install
--cloud-init-compat``). The user-data's runcmd sleeps and then fails, so the final stage is still
running when SSH comes up and the waits start; all times are read on the guest's clock.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.e2e.guest import BOOT_TIMEOUT, spec, ssh, user_data

SLEEP = 40
WAIT_STATUS = "cloud-init status --wait > /tmp/wait.out; echo $? $(date +%s.%N)"
WAIT_FILE = "while [ ! -f /var/lib/cloud/instance/boot-finished ]; do sleep 0.2; done; date +%s.%N"


class _Result:
    def __init__(self, vm):
        self.vm = vm


def _ssh_retry(result, key: str, command: str, tries: int = 30):
    proc = None
    for _ in range(tries):
        proc = ssh(result, key, "tester", command)
        if proc.returncode != 255:  # 255: ssh itself failed (not up yet)
            return proc
        time.sleep(2)
    return proc


@pytest.mark.e2e_extra
def test_packer_and_terraform_waits_return_when_the_final_stage_is_done(lab, ssh_key, tmp_path):
    from cloudseed.lab.machine.vm import VirtualMachine, VmSpec
    from cloudseed.provider.seeds.build import build_seed

    image, accel, _reason = lab
    data = user_data(ssh_key[1]).decode() + (f"  - sleep {SLEEP}\n"
                                             "  - date +%s.%N > /var/tmp/scripts-ran\n  - exit 1\n")
    instance = spec(ssh_key[1], instance_id="iid-drop-in", data=data.encode())
    seed = str(tmp_path / "seed.iso")
    build_seed("nocloud", "iso9660", instance, seed)
    vm = VirtualMachine(VmSpec(image=image, workdir=str(tmp_path / "vm"), seeds=[seed], accel=accel))
    vm.start()
    result = _Result(vm)
    try:
        assert vm.wait_ssh(BOOT_TIMEOUT) is not None, "SSH never came up"
        early = _ssh_retry(result, ssh_key[0], "cat /run/cloud-init/status.json")
        assert early.returncode == 0, early.stderr
        final = json.loads(early.stdout)["v1"]["modules-final"]
        assert not final.get("finished"), "the final stage was over before the waits started"
        outputs: dict[str, object] = {}

        def wait(name: str, command: str) -> None:
            outputs[name] = ssh_wait(result, ssh_key[0], command)

        threads = [threading.Thread(target=wait, args=("status", WAIT_STATUS)),
                   threading.Thread(target=wait, args=("file", WAIT_FILE))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(BOOT_TIMEOUT)
        status_proc, file_proc = outputs["status"], outputs["file"]
        assert status_proc.returncode == 0 and file_proc.returncode == 0, (status_proc.stderr, file_proc.stderr)
        code, status_at = status_proc.stdout.split()
        file_at = float(file_proc.stdout.strip())
        after = ssh(result, ssh_key[0], "tester",
                    "cat /run/cloud-init/status.json /tmp/wait.out; echo; cat /var/tmp/scripts-ran")
        body, _, rest = after.stdout.partition("\n}\n")
        record = json.loads(body + "\n}")
        finished = record["v1"]["modules-final"]["finished"]
        scripts_ran = float(rest.strip().splitlines()[-1])
        assert code == "1", after.stdout  # the failing runcmd: an error, exit 1 as cloud-init's
        assert "status: error" in rest
        assert float(status_at) >= finished  # returned once the final stage was done, not before
        assert file_at >= scripts_ran  # boot-finished appears after the user's scripts ran
    finally:
        vm.stop()


def ssh_wait(result, key: str, command: str):
    """One wait as a provisioner runs it: ssh, retried while sshd refuses, the command unchanged."""
    return _ssh_retry(result, key, command)
