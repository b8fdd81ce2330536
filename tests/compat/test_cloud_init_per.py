"""``cloud-init-per``: once / instance / always across a reboot and a new instance, differential.

The reference is Debian's own ``cloud-init-per`` script (from cloud-init's .deb, as tests/reference.py
unpacks it), run chrooted in a busybox root whose ``/var/lib/cloud/instance`` is switched the way
cloud-init switches it. Ours runs in another such root where real boots (``Agent.run_all`` from a
NoCloud seed) keep the links. Both see the same calls; the commands' runs, the exit codes and the
semaphore files must be the same.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from cloudseed.commands.cloud_init_per import main as _unused  # noqa: F401  (the entry point exists)

BUSYBOX = "/bin/busybox"
APPLETS = ("sh", "echo", "cat", "mkdir", "id", "printf", "rm", "test", "[", "date", "sed", "mv", "true", "false")
CALLS = [("once", "first-run"), ("instance", "per-instance"), ("always", "every-boot"), ("once", "fails")]


def busybox_root(top: str) -> None:
    for d in ("bin", "tmp", "var/tmp", "etc"):
        os.makedirs(f"{top}/{d}", exist_ok=True)
    shutil.copy2(BUSYBOX, f"{top}/bin/busybox")
    for applet in APPLETS:
        os.symlink("busybox", f"{top}/bin/{applet}")
    with open(f"{top}/etc/passwd", "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(f"{top}/etc/group", "w") as f:
        f.write("root:x:0:\n")
    with open(f"{top}/etc/os-release", "w") as f:
        f.write('ID=debian\nVERSION_ID="12"\n')


def command(name: str) -> list[str]:
    if name == "fails":
        return ["sh", "-c", "echo fails >> /var/tmp/runs; exit 3"]
    return ["sh", "-c", f"echo {name} >> /var/tmp/runs"]


def runs(top: str) -> list[str]:
    path = f"{top}/var/tmp/runs"
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().split()


def semaphores(top: str) -> list[str]:
    found = []
    for _directory, _dirs, files in os.walk(f"{top}/var/lib"):
        found += [name for name in files if name.startswith("bootper.")]
    return sorted(found)


def reference_boot(top: str, instance_id: str) -> None:
    """What cloud-init does to the paths cloud-init-per reads, at a boot of ``instance_id``."""
    os.makedirs(f"{top}/var/lib/cloud/instances/{instance_id}/sem", exist_ok=True)
    link = f"{top}/var/lib/cloud/instance"
    if os.path.islink(link):
        os.unlink(link)
    os.symlink(f"/var/lib/cloud/instances/{instance_id}", link)


def our_boot(top: str, instance_id: str) -> None:
    from cloudseed.agent.boot.stages import Agent
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(top)
    root.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg", "network: {config: disabled}\ncloud_init_modules: []\n"
               "cloud_config_modules: []\ncloud_final_modules: []\n")
    root.write("/var/lib/cloud/seed/nocloud/meta-data", f"instance-id: {instance_id}\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", "#cloud-config\n{}\n")
    shutil.rmtree(f"{top}/run", ignore_errors=True)  # a reboot empties /run
    assert Agent(root).run_all() == 0


def reference_per(top: str, script: str, frequency: str, name: str) -> int:
    shutil.copy2(script, f"{top}/bin/cloud-init-per")
    return subprocess.run(["/usr/sbin/chroot", top, "/bin/sh", "/bin/cloud-init-per", frequency, name, *command(name)],
                          env={"PATH": "/bin"}, capture_output=True).returncode


def our_per(top: str, frequency: str, name: str) -> int:
    from cloudseed.cli import main

    return main(["--root", top, "cloud-init-per", frequency, name, *command(name)])


@pytest.mark.root
@pytest.mark.reference
def test_cloud_init_per_matches_the_reference_across_reboots_and_instances(tmp_path):
    from tests.reference import reference_tree

    if os.geteuid() != 0 or not os.path.exists(BUSYBOX):
        pytest.skip("needs root and busybox-static")
    tree = reference_tree()
    if tree is None:
        pytest.skip("reference cloud-init not available")
    script = os.path.join(tree, "usr", "bin", "cloud-init-per")
    ref, ours = str(tmp_path / "ref"), str(tmp_path / "ours")
    busybox_root(ref)
    busybox_root(ours)
    codes = {"ref": [], "ours": []}
    for instance_id in ("iid-a", "iid-a", "iid-b"):  # first boot, reboot, a new instance
        reference_boot(ref, instance_id)
        our_boot(ours, instance_id)
        for frequency, name in CALLS:
            codes["ref"].append(reference_per(ref, script, frequency, name))
            codes["ours"].append(our_per(ours, frequency, name))
    assert codes["ours"] == codes["ref"]
    assert runs(ours) == runs(ref)
    assert sorted(runs(ours)) == sorted(["first-run"] + ["per-instance"] * 2 + ["every-boot"] * 3 + ["fails"])
    assert codes["ours"][:4] == [0, 0, 0, 3] and codes["ours"][7] == 0  # a failure is not run again
    assert semaphores(ours) == semaphores(ref)
    # the semaphores are where cloud-init keeps them: the per-instance one in the instance's directory
    assert os.path.isfile(f"{ours}/var/lib/cloud/sem/bootper.first_run.once")
    assert os.path.isfile(f"{ours}/var/lib/cloudseed/instances/iid-b/sem/bootper.per_instance.instance")
    with open(f"{ours}/var/lib/cloud/sem/bootper.fails.once") as f:
        code, stamp = f.read().split("\t")
    assert code == "3" and stamp.strip().isdigit()


def test_cloud_init_per_usage_errors(tmp_path):
    from cloudseed.cli import main

    assert main(["--root", str(tmp_path), "cloud-init-per", "weekly", "name", "true"]) == 1
    assert main(["--root", str(tmp_path), "cloud-init-per", "once", "a/b", "true"]) == 1
