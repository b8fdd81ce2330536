"""Whole boots in a temporary root for the agent's tests: a NoCloud seed directory with the core's
module lists, one boot through the four stages, and what it left (files, status.json)."""

from __future__ import annotations

import json
import os
import shutil
import textwrap

from cloudseed.agent.boot.stages import Agent

SEED = "/var/lib/cloud/seed/nocloud"


USER_DATA = textwrap.dedent("""\
    #cloud-config
    write_files:
      - path: /etc/demo/app.conf
        content: |
          key=value
        permissions: '0640'
      - path: /etc/demo/blob.bin
        encoding: b64
        content: aGVsbG8gd29ybGQ=
        permissions: '0600'
      - path: /etc/demo/late.txt
        content: written in the final stage
        defer: true
    bootcmd:
      - echo boot >> /var/tmp/bootcmd.log
    runcmd:
      - echo run >> /var/tmp/runcmd.log
      - [sh, -c, 'echo "$INSTANCE_ID" > /var/tmp/runcmd-iid']
    """)


CORE_MODULES = """\
network: {config: disabled}
cloud_init_modules: [bootcmd, write_files]
cloud_config_modules: [runcmd]
cloud_final_modules: [write_files_deferred, scripts_vendor, scripts_per_once, scripts_per_boot,
                      scripts_per_instance, scripts_user, final_message]
"""


def seed(root, meta: str, user: str | bytes | None = USER_DATA, vendor: str | None = None) -> None:
    """A NoCloud seed directory; the module lists are the core's own (identity modules have their tests)."""
    if not root.exists("/etc/cloudseed/cloud.cfg.d/00-core-modules.cfg"):
        root.write("/etc/cloudseed/cloud.cfg.d/00-core-modules.cfg", CORE_MODULES)
    root.write(f"{SEED}/meta-data", meta)
    if user is not None:
        root.write(f"{SEED}/user-data", user)
    if vendor is not None:
        root.write(f"{SEED}/vendor-data", vendor)


def boot(root) -> int:
    """One boot: /run is empty at the start of every boot."""
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    return Agent(root).run_all()


def read(root, path: str) -> str:
    return root.read_text(path)


def lines(root, path: str) -> list[str]:
    return read(root, path).split() if root.exists(path) else []


def status(root) -> dict:
    return json.loads(read(root, "/run/cloudseed/status.json"))
