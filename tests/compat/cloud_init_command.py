"""A NoCloud root booted for real and ``cloud-init``'s command run on it (the command tests): the seed
holds an admin password, so the tests can check where secrets end up."""

from __future__ import annotations

import shutil

from cloudseed.agent.boot.stages import BootState, run_local, run_modules, run_network
from cloudseed.commands.cloud_init import cloud_init

MODULES = ("network: {config: disabled}\ncloud_init_modules: [bootcmd]\ncloud_config_modules: []\n"
           "cloud_final_modules: []\n")


ADMIN_PASS = "AdminSecretFromMetadata42"


def seed(root, user_data: str = "#cloud-config\n{}\n", instance_id: str = "iid-cmd") -> None:
    root.write("/etc/cloudseed/cloud.cfg.d/00-test.cfg", MODULES)
    root.write("/var/lib/cloud/seed/nocloud/meta-data",
               f"instance-id: {instance_id}\nlocal-hostname: cmd\nadmin_pass: {ADMIN_PASS}\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", user_data)


def boot(root) -> None:
    shutil.rmtree(root.path("/run"), ignore_errors=True)
    state = BootState.load(root)
    run_local(state)
    run_network(state)
    run_modules(state, "config")
    run_modules(state, "final")


def ci(root, *argv: str) -> int:
    return cloud_init(["--root", root.top, *argv])
