"""cloud-init's paths after real boots in temporary roots: links, their targets and modes, boot-finished."""

from __future__ import annotations

import os
import shutil
import stat

from cloudseed.agent.boot.stages import BootState, run_local, run_modules, run_network

MODULES = ("network: {config: disabled}\ncloud_init_modules: []\ncloud_config_modules: []\n"
           "cloud_final_modules: []\n")
FINISHED = "/var/lib/cloud/instance/boot-finished"


def seed(root, instance_id: str) -> None:
    root.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg", MODULES)
    root.write("/var/lib/cloud/seed/nocloud/meta-data",
               f"instance-id: {instance_id}\nlocal-hostname: h\nadmin_pass: AdminSecret1234\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", "#cloud-config\n{}\n")


def boot_in_steps(root) -> list[bool]:
    """One boot, stage by stage: whether boot-finished existed after each stage."""
    shutil.rmtree(root.path("/run"), ignore_errors=True)
    state = BootState.load(root)
    seen = []
    for stage in (lambda: run_local(state), lambda: run_network(state), lambda: run_modules(state, "config"),
                  lambda: run_modules(state, "final")):
        assert stage() == 0
        seen.append(root.exists(FINISHED))
    return seen


def link(root, inner: str) -> str:
    return os.readlink(root.path_nofollow(inner))


def mode(root, inner: str) -> int:
    return stat.S_IMODE(os.stat(root.path(inner)).st_mode)


def test_cloud_init_paths_after_a_boot(target):
    root = target
    seed(root, "iid-paths")
    assert boot_in_steps(root) == [False, False, False, True]
    assert link(root, "/var/lib/cloud/instance") == "/var/lib/cloudseed/instances/iid-paths"
    assert root.read_text("/var/lib/cloud/data/instance-id").strip() == "iid-paths"
    for name in ("status.json", "result.json", "instance-data.json", "instance-data-sensitive.json"):
        assert link(root, f"/run/cloud-init/{name}") == f"/run/cloudseed/{name}"
        assert root.read_bytes(f"/run/cloud-init/{name}") == root.read_bytes(f"/run/cloudseed/{name}")
    for name in ("status.json", "result.json"):
        assert link(root, f"/var/lib/cloud/data/{name}") == f"/run/cloud-init/{name}"
    assert '"v1"' in root.read_text("/var/lib/cloud/data/result.json")
    # same modes and redaction as cloudseed's own files (they are the same files)
    assert mode(root, "/run/cloud-init/instance-data-sensitive.json") == 0o600
    assert mode(root, "/run/cloud-init/instance-data.json") == 0o644
    assert "AdminSecret1234" in root.read_text("/run/cloud-init/instance-data-sensitive.json")
    assert "AdminSecret1234" not in root.read_text("/run/cloud-init/instance-data.json")
    assert link(root, "/var/log/cloud-init.log") == "/var/log/cloudseed.log"
    assert link(root, "/var/log/cloud-init-output.log") == "/var/log/cloudseed-output.log"
    assert mode(root, FINISHED) == 0o644 and " - " in root.read_text(FINISHED)


def test_boot_finished_waits_for_each_boot_and_the_instance_link_follows_a_new_instance(target):
    root = target
    seed(root, "iid-one")
    boot_in_steps(root)
    assert boot_in_steps(root) == [False, False, False, True]  # a reboot: removed at the local stage
    seed(root, "iid-two")
    assert boot_in_steps(root) == [False, False, False, True]
    assert link(root, "/var/lib/cloud/instance") == "/var/lib/cloudseed/instances/iid-two"
    assert root.read_text("/var/lib/cloud/data/instance-id").strip() == "iid-two"


def test_a_log_an_earlier_cloud_init_left_is_kept(target):
    root = target
    root.write("/var/log/cloud-init.log", "cloud-init's own log\n")
    seed(root, "iid-log")
    boot_in_steps(root)
    assert not root.islink("/var/log/cloud-init.log")
    assert root.read_text("/var/log/cloud-init.log") == "cloud-init's own log\n"
    assert root.islink("/var/log/cloud-init-output.log")
