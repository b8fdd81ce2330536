"""cloud-init's paths, for the tools that poll them, as links to cloudseed's own state.

Packer, Terraform, Ansible and monitoring read cloud-init's locations; cloudseed keeps its
state in its own (``agent/state/``). ``publish`` keeps these links (nothing is copied, so the
modes and the redaction are those of cloudseed's files):

- ``/run/cloud-init/{status,result,instance-data,instance-data-sensitive}.json`` -> ``/run/cloudseed/``
  (a link whose target is not written yet is dangling: a poller sees "not there yet");
- ``/var/lib/cloud/data/{status,result}.json`` -> ``/run/cloud-init/`` (as cloud-init links them),
  ``/var/lib/cloud/data/instance-id`` -> cloudseed's record of it;
- ``/var/lib/cloud/instance`` -> the current instance directory;
- ``/var/log/cloud-init.log`` and ``cloud-init-output.log`` -> cloudseed's logs (a real file an
  earlier cloud-init left there is kept: it is somebody's log);
- ``boot-finished`` in the instance directory, written when this boot's final stage has finished
  (with or without errors, as cloud-init's final stage does) and removed when a boot's local stage
  starts, so a wait after a reboot waits for that boot.

Called whenever the boot status or result is written (``StatusRecorder.save`` and
``write_result``): a handful of ``readlink`` calls when everything is in place already.
"""

from __future__ import annotations

import logging
import os
import time

from cloudseed.agent.state import DATA_DIR, LOG_FILE, RUN_DIR, Paths

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

    from cloudseed.core.root import TargetRoot

LOG = logging.getLogger("cloudseed.compat")

CLOUD_DIR = "/var/lib/cloud"
CLOUD_RUN = "/run/cloud-init"
INSTANCE_LINK = f"{CLOUD_DIR}/instance"
BOOT_FINISHED = "boot-finished"
OUTPUT_LOG = "/var/log/cloudseed-output.log"  # cloudseed.agent.scripts.OUTPUT_LOG, not imported at boot

# link -> target (absolute, as the target system sees them)
LINKS = {
    f"{CLOUD_RUN}/status.json": f"{RUN_DIR}/status.json",
    f"{CLOUD_RUN}/result.json": f"{RUN_DIR}/result.json",
    f"{CLOUD_RUN}/instance-data.json": f"{RUN_DIR}/instance-data.json",
    f"{CLOUD_RUN}/instance-data-sensitive.json": f"{RUN_DIR}/instance-data-sensitive.json",
    f"{CLOUD_DIR}/data/status.json": f"{CLOUD_RUN}/status.json",
    f"{CLOUD_DIR}/data/result.json": f"{CLOUD_RUN}/result.json",
    f"{CLOUD_DIR}/data/instance-id": f"{DATA_DIR}/data/instance-id",
    "/var/log/cloud-init.log": LOG_FILE,
    "/var/log/cloud-init-output.log": OUTPUT_LOG,
}
KEEP_REAL_FILES = ("/var/log/cloud-init.log", "/var/log/cloud-init-output.log")


def publish(paths: Paths, data: dict[str, Any] | None = None, result_written: bool = False) -> None:
    """Bring cloud-init's paths up to date with the boot status ``data``; never raises.

    ``result_written``: ``result.json`` has just been written (``boot-finished`` is written only
    then, so a tool that sees it finds the result too).
    """
    try:
        _publish(paths, data or {}, result_written)
    except Exception as e:  # a compatibility link must never fail a stage
        LOG.warning("cloud-init compatible paths not updated: %s", e)


def _publish(paths: Paths, data: dict[str, Any], result_written: bool) -> None:
    root = paths.root
    links = dict(LINKS)
    instance_dir = _readlink(root, paths.instance_link)
    if instance_dir:
        links[INSTANCE_LINK] = instance_dir
    for link, target in links.items():
        _link(root, link, target)
    if not instance_dir:
        return
    v1 = data.get("v1") or {}
    finished = f"{instance_dir}/{BOOT_FINISHED}"
    if v1.get("stage") == "init-local":
        root.remove(finished)
    elif result_written and v1.get("stage") is None and _final_done(v1) and not root.exists(finished):
        from cloudseed import __version__

        uptime = _uptime()
        stamp = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime())
        root.write(finished, f"{uptime} - {stamp} - v. cloudseed {__version__}\n", mode=0o644)


def _final_done(v1: dict[str, Any]) -> bool:
    """Has this boot's final stage finished (not one recorded by an earlier boot)?"""
    final = v1.get("modules-final") or {}
    local = v1.get("init-local") or {}
    return bool(final.get("finished")) and final["finished"] >= (local.get("start") or 0)


def _uptime() -> str:
    try:
        with open("/proc/uptime") as f:
            return f.read().split()[0]
    except (OSError, IndexError):
        return "0.00"


def _readlink(root: TargetRoot, inner: str) -> str | None:
    try:
        return os.readlink(root.path_nofollow(inner))
    except OSError:
        return None


def _link(root: TargetRoot, link: str, target: str) -> None:
    host = root.path_nofollow(link)
    try:
        if os.readlink(host) == target:
            return
    except FileNotFoundError:
        pass
    except OSError:  # not a link: a file or a directory is there
        if os.path.isdir(host) or link in KEEP_REAL_FILES:
            LOG.info("%s is not a link to %s: left as it is", link, target)
            return
    root.symlink(target, link)


def remove(root: TargetRoot) -> list[str]:
    """Remove the links and markers ``publish`` made (``clean``, package purge); what was removed."""
    removed = []
    instance_dir = _readlink(root, INSTANCE_LINK)
    for link in (*LINKS, INSTANCE_LINK):
        target = LINKS.get(link) or (instance_dir if (instance_dir or "").startswith(DATA_DIR + "/") else None)
        if target and _readlink(root, link) == target and root.remove(link):
            removed.append(link)
    for directory in (f"{CLOUD_DIR}/data", CLOUD_RUN):
        try:
            os.rmdir(root.path_nofollow(directory))  # only when empty: never somebody else's files
        except OSError:
            pass
    return removed
