"""Packer's and Terraform's use of cloud-init's status, under both exit-code rules.

Both wait for the boot with ``cloud-init status --wait`` over SSH and fail the build (Packer's
shell provisioner, Terraform's ``remote-exec``) on any non-zero exit. A boot that ends with
warnings only (an unknown key, a deprecated spelling) is "done" for cloud-init 22.4, whose
``status`` exits 0, and "degraded" for 23.4 and later, which exit 2: the same image fails those
builds after an upgrade (scylla-machine-image #968, DigitalOcean's marketplace #186). cloudseed
follows whichever the image's ``status_exit_codes`` names; these tests run the waiter as those
tools do, beside a real boot of a temporary root, for both rules and the three ends of a boot.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = ("network: {config: disabled}\ncloud_init_modules: [bootcmd]\ncloud_config_modules: [runcmd]\n"
           "cloud_final_modules: [scripts_user]\n")
ENDS = {
    "done": ("#cloud-config\nruncmd: ['true']\n", {"22.4": 0, "23.4": 0}),
    "degraded": ("#cloud-config\nruncmd: ['true']\nusers: [{name: bob, lock-passwd: true}]\n"
                 "not_a_key: 1\n", {"22.4": 0, "23.4": 2}),
    "error": ("#cloud-config\nruncmd: ['exit 4']\n", {"22.4": 1, "23.4": 1}),
}


def waiter(top: str) -> subprocess.Popen:
    """What Packer's provisioner and Terraform's remote-exec run on the guest, with the image's root."""
    return subprocess.Popen([sys.executable, os.path.join(PROJECT, "packaging", "bin", "cloud-init"), "--root", top,
                             "status", "--wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=PROJECT, env=dict(os.environ, PYTHONPATH=PROJECT))


@pytest.mark.parametrize("rule", ["22.4", "23.4"])
@pytest.mark.parametrize("end", list(ENDS))
def test_status_wait_exit_code_as_the_replaced_release(shell_target, rule, end):
    root = shell_target
    user_data, codes = ENDS[end]
    root.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg", MODULES)
    root.write("/etc/cloudseed/cloud.cfg.d/05-status-exit-codes.cfg", f'status_exit_codes: "{rule}"\n')
    root.write("/var/lib/cloud/seed/nocloud/meta-data", f"instance-id: iid-{end}\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", user_data)
    root.write("/run/cloudseed/enabled", "{}")  # the generator decided the agent runs this boot
    wait = waiter(root.top)
    try:
        time.sleep(0.3)
        assert wait.poll() is None  # nothing has run yet: it waits
        booted = subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, "boot"], cwd=PROJECT,
                                capture_output=True, text=True, timeout=120)
        out, err = wait.communicate(timeout=60)
    finally:
        if wait.poll() is None:
            wait.kill()
            wait.wait()
    assert booted.returncode == (1 if end == "error" else 0), booted.stderr[-1000:]
    assert wait.returncode == codes[rule], (out, err)
    said = [line for line in out.splitlines() if line.startswith("status: ")]
    assert said == ["status: error" if end == "error" else "status: done"]  # cloud-init's words, both releases
    assert out.startswith(".")  # it printed its progress dots while it waited
    # a build step that fails on non-zero (Packer, Terraform) goes on exactly when the release it was
    # written for would have let it
    assert (wait.returncode == 0) == (end == "done" or (end == "degraded" and rule == "22.4"))
