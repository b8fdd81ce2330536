"""``collect-logs`` against cloud-init 26.2's: the same files in the tarball, by the same rules.

A root cloudseed booted (with configuration, logs and an installer's files beside) is collected
by cloudseed; the same files, put at cloud-init's paths (``/run/cloudseed`` as ``/run/cloud-init``,
``/var/lib/cloudseed`` as ``/var/lib/cloud``, the current instance as ``instance/``,
``/etc/cloudseed`` beside ``/etc/cloud``, ``cloudseed.log`` as ``cloud-init.log``), are collected
by cloud-init 26.2's own ``collect_logs`` (its ``/etc/cloud`` and installer paths pointed into that
copy). Both tarballs must list the same files.

The deliberate difference, already named (CVE-2023-1786): 26.x collects the files only root may
read unless ``--redact-sensitive``; cloudseed leaves them out unless ``--include-userdata``. So
cloudseed's default is compared with 26.2's ``--redact-sensitive``, and cloudseed's
``--include-userdata`` with 26.2's default. (cloudseed also replaces secret values in what it
collects unless asked not to: ``test_cloud_init_command.py``.) The commands' outputs (versions,
journals, dmesg) depend on the machine, not the root: their presence is compared.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile

import pytest

from tests.compat.cloud_init_command import boot, ci, seed
from tests.reference import NEW

pytestmark = pytest.mark.reference

# with --redact-sensitive, what 26.x still collects and cloudseed's default leaves out, on purpose:
# the installer's files are taken whole by 26.x (its redaction skips them); cloudseed's rule is the
# same for every file (a file only root reads stays out by default)
REDACT_DIFFERS = {"var/log/installer/block/probe-data.json"}
COMMANDS = {"version", "dpkg-version", "journal.txt", "journal-previous.txt", "dmesg.txt"}
# cloudseed's locations -> cloud-init's (the rest is where it is); the instance is added per root
RENAMES = [("run/cloudseed/", "run/cloud-init/"), ("var/lib/cloudseed/data/", "var/lib/cloud/data/"),
           ("var/lib/cloudseed/handlers/", "var/lib/cloud/handlers/"),
           ("var/lib/cloudseed/seed/", "var/lib/cloud/seed/"), ("etc/cloudseed/", "etc/cloud/"),
           ("var/log/cloudseed.log", "var/log/cloud-init.log"),
           ("var/log/cloudseed-output.log", "var/log/cloud-init-output.log")]

_THEIRS = r"""
import functools, json, pathlib, sys, tarfile
from cloudinit.cmd.devel import logs
from cloudinit.log import loggers
loggers.define_extra_loggers()  # what its command line sets up (trace, deprecated levels)
top, tarball, sensitive = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
logs._get_etc_cloud = functools.partial(logs._get_etc_cloud, etc_cloud_dir=top / "etc/cloud")
inside = lambda files: [logs.ApportFile(str(top) + f.path, f.label) for f in files]
logs.INSTALLER_APPORT_FILES = inside(logs.INSTALLER_APPORT_FILES)
logs.INSTALLER_APPORT_SENSITIVE_FILES = inside(logs.INSTALLER_APPORT_SENSITIVE_FILES)
cfg = {"def_log_file": f"{top}/var/log/cloud-init.log",
       "output": {"all": f"| tee -a {top}/var/log/cloud-init-output.log"}}
logs.collect_logs(tarball, cfg, run_dir=top / "run/cloud-init", cloud_dir=top / "var/lib/cloud",
                  include_sensitive=sensitive)
with tarfile.open(tarball) as tar:
    names = [m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()]
print(json.dumps(sorted(n[len(str(top)):].lstrip("/") if n.startswith(str(top).lstrip("/")) else n
                        for n in names)))
"""


@pytest.fixture
def booted(target):
    root = target
    seed(root, "#cloud-config\nchpasswd:\n  users:\n    - {name: root, password: Hunter2Secret, type: text}\n")
    boot(root)
    for path, text, mode in (
            ("/var/log/cloudseed.log", "stage local start\n", 0o644),
            ("/var/log/cloudseed-output.log", "output of the scripts\n", 0o640),
            ("/etc/cloud/cloud.cfg.d/90-site.cfg", "datasource_list: [NoCloud]\n", 0o644),
            ("/etc/cloud/cloud.cfg.d/91-private.cfg", "apt: {proxy: http://u:p@proxy}\n", 0o600),
            ("/etc/cloud/cloud.cfg.d/99-installer.cfg", "autoinstall: {}\n", 0o600),
            ("/etc/cloud/templates/hosts.debian.tmpl", "x\n", 0o644),
            ("/etc/cloud/keys/secret.pem", "k\n", 0o600),
            ("/var/log/installer/curtin-install.log", "curtin\n", 0o644),
            ("/var/log/installer/block/probe-data.json", "{}\n", 0o600),
            ("/autoinstall.yaml", "version: 1\n", 0o600),
            ("/var/lib/cloudseed/handlers/part-handler-000.py", "# a handler\n", 0o644),
            ("/var/lib/cloud/seed/README", "a file at the top of seed/\n", 0o644)):
        root.write(path, text, mode=mode)
    return root


def cloud_init_layout(root, view: str) -> dict[str, str]:
    """Copy each real file of ``root`` to cloud-init's path for it under ``view`` (modes kept):
    cloud-init's name -> cloudseed's."""
    instance = os.readlink(os.path.join(root.top, "var/lib/cloudseed/instance")).lstrip("/") + "/"
    renames = RENAMES + [(instance, "var/lib/cloud/instance/")]
    names = {}  # cloudseed collects the instance through its link: the name it gives
    for dirpath, _, files in os.walk(root.top):
        for name in files:
            real = os.path.join(dirpath, name)
            ours = os.path.relpath(real, root.top)
            if os.path.islink(real):
                continue  # cloudseed's links at cloud-init's paths: the copy puts the files there
            theirs = next((new + ours[len(old):] for old, new in renames if ours.startswith(old)), ours)
            os.makedirs(os.path.dirname(os.path.join(view, theirs)), exist_ok=True)
            shutil.copy2(real, os.path.join(view, theirs))
            names[theirs] = "var/lib/cloudseed/instance/" + ours[len(instance):] if ours.startswith(instance) else ours
    return names


def listing(tarball: str) -> set[str]:
    with tarfile.open(tarball) as tar:
        return {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}


@pytest.mark.parametrize("ours_args, their_sensitive", [([], False), (["--include-userdata"], True)],
                         ids=["default-vs-redact-sensitive", "include-userdata-vs-default"])
def test_the_tarball_lists_the_files_cloud_init_26_lists(booted, tmp_path, ours_args, their_sensitive):
    root = booted
    view = str(tmp_path / "cloud-init-layout")
    as_ours = cloud_init_layout(root, view)
    assert ci(root, "collect-logs", "-t", str(tmp_path / "ours.tar.gz"), *ours_args) == 0
    ours = listing(str(tmp_path / "ours.tar.gz"))
    proc = NEW.python(_THEIRS, view, str(tmp_path / "theirs.tar.gz"), "1" if their_sensitive else "0")
    theirs = set(json.loads(proc.stdout))
    if not their_sensitive:
        assert theirs >= REDACT_DIFFERS and not REDACT_DIFFERS & ours
        theirs -= REDACT_DIFFERS
    assert {as_ours.get(name, name) for name in theirs - COMMANDS} == ours - COMMANDS, (
        sorted(ours - COMMANDS), sorted(as_ours.get(n, n) for n in theirs - COMMANDS))
    print(f"collect-logs {' '.join(ours_args) or '(default)'}: {len(ours - COMMANDS)} files, the listing of "
          f"cloud-init {NEW.version()} {'(default)' if their_sensitive else '--redact-sensitive'}")
    assert COMMANDS - {"dmesg.txt"} <= theirs and ("dmesg.txt" in theirs) == their_sensitive
    assert "version" in ours  # the other commands run only on the machine itself (not for --root)
    # what the comparison covers: logs, run directory, configuration, data, instance, installer
    expected = {"var/log/cloudseed.log", "run/cloudseed/status.json", "etc/cloud/cloud.cfg.d/90-site.cfg",
                "var/lib/cloudseed/data/instance-id", "var/lib/cloudseed/instance/boot-finished",
                "var/log/installer/curtin-install.log", "var/lib/cloudseed/handlers/part-handler-000.py",
                "var/lib/cloud/seed/README"}
    sensitive = {"run/cloudseed/instance-data-sensitive.json", "var/lib/cloudseed/instance/user-data.txt",
                 "etc/cloud/cloud.cfg.d/91-private.cfg", "etc/cloud/cloud.cfg.d/99-installer.cfg",
                 "autoinstall.yaml", "var/log/installer/block/probe-data.json"}
    assert expected <= ours and (sensitive <= ours if their_sensitive else not sensitive & ours), sorted(ours)
    assert not {"etc/cloud/keys/secret.pem", "etc/cloud/templates/hosts.debian.tmpl",
                "var/lib/cloud/seed/nocloud/user-data"} & ours


def test_the_kernel_messages_only_with_the_sensitive_files():
    """dmesg is collected with the sensitive files only (as 24.3+ does); the journals always."""
    from cloudseed.commands.collect_logs import collect
    from cloudseed.core.root import TargetRoot

    if not shutil.which("dmesg") or os.geteuid() != 0:
        pytest.skip("needs dmesg, as root")
    root = TargetRoot("/")
    assert "dmesg.txt" not in collect(root, include_userdata=False)
    assert "dmesg.txt" in collect(root, include_userdata=True)
