"""Benchmark: the agent's own time around the package manager, beside Debian's cloud-init 22.4.

One document (``package_update: true`` and three packages, one pinned) is applied in a fresh
private copy of the debootstrapped bookworm root, against a signed repository served on loopback
(tests/agent/packages/repo.py), by:
  - cloudseed's package_update_upgrade_install through the real module framework;
  - cloud-init 22.4's cc_package_update_upgrade_install.handle with its Debian distro, run by
    Debian's /usr/bin/python3 (tests/reference.py); its commands are chrooted into the same kind
    of root (``chroot ROOT`` put in front of the argv) and its lock and reboot-flag paths pointed
    into that root, so it never touches the host's packages.
Overhead = the module's wall time minus the wall time of the apt-get processes it ran (each
measured around the process, chroot included). Target: cloudseed's overhead < 100 ms.
Runs alternate between the two; medians are reported. cloudseed's first run also pays for
importing the module and its plugins (as a boot does); the reference's imports happen before its
timer starts, so its figure is its handler alone.

Run: .venv/bin/python bench/package_overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(HERE)
sys.path.insert(0, PROJECT)  # run as a script: the tests package (repository, chroot helpers) of this checkout

DOCUMENT = {"package_update": True, "packages": ["hello-cs", ["tool-cs", "1.0"], "extra-cs"]}

REFERENCE_CODE = r"""
import json, logging, sys, time
root, cfg_text, state = sys.argv[1], sys.argv[2], sys.argv[3]
from cloudinit import helpers, subp
from cloudinit.config import cc_package_update_upgrade_install as module
from cloudinit.distros import debian

debian.APT_LOCK_FILES = [root + p for p in debian.APT_LOCK_FILES]
module.REBOOT_FILE = root + module.REBOOT_FILE
spent = [0.0]
real_subp = subp.subp
def chrooted(args, *a, **kw):
    kw["capture"] = True
    started = time.monotonic()
    try:
        return real_subp(["chroot", root] + list(args), *a, **kw)
    finally:
        spent[0] += time.monotonic() - started
subp.subp = chrooted
paths = helpers.Paths({"cloud_dir": state + "/cloud", "run_dir": state + "/run"})
distro = debian.Distro("debian", {}, paths)
class Cloud:
    pass
cloud = Cloud()
cloud.distro = distro
logging.basicConfig(level=logging.WARNING)
started = time.monotonic()
module.handle("package_update_upgrade_install", json.loads(cfg_text), cloud, logging.getLogger("ref"), [])
total = time.monotonic() - started
print(json.dumps({"total": total, "commands": spent[0]}))
"""


def fresh_root(base: str, name: str):
    from cloudseed.core.root import TargetRoot
    from tests.agent.identity import debian_chroot

    return TargetRoot(debian_chroot.unpack(os.path.join(base, name)))


def run_ours(root, url: str, repository) -> dict:
    from cloudseed.agent.package_managers import base
    from cloudseed.core.root import TargetRoot
    from tests.agent.modules.module_support import run
    from tests.agent.packages import repo

    spent = [0.0]
    real_run = TargetRoot.run

    def timed(self, argv, **kwargs):
        started = time.monotonic()
        try:
            return real_run(self, argv, **kwargs)
        finally:
            if "apt-get" in argv:
                spent[0] += time.monotonic() - started

    base.forget_refreshes()
    with repo.chroot_mounts(root.top):
        repository.configure_root(root, url)
        TargetRoot.run = timed
        try:
            result, _ = run(root, "package_update_upgrade_install", DOCUMENT, stage="final")
        finally:
            TargetRoot.run = real_run
    if result.status != "ok":
        raise SystemExit(f"cloudseed run failed: {result.reason}")
    return {"total": result.seconds, "commands": spent[0]}


def run_reference(root, url: str, repository, state: str) -> dict:
    from tests.agent.packages import repo
    from tests.reference import reference_python

    with repo.chroot_mounts(root.top):
        repository.configure_root(root, url)
        proc = reference_python(REFERENCE_CODE, root.top, json.dumps(DOCUMENT), state)
    if proc.returncode != 0:
        raise SystemExit(f"reference run failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (chroot, mounts)")
    from tests.agent.packages import repo

    work = tempfile.mkdtemp(prefix="cloudseed-bench-packages-")
    repository = repo.Repository(os.path.join(work, "repo"))
    samples: dict[str, list[dict]] = {"cloudseed": [], "cloud-init 22.4": []}
    try:
        for name, version in (("hello-cs", "1.0"), ("tool-cs", "1.0"), ("tool-cs", "1.1"), ("extra-cs", "3.0")):
            repository.add(name, version)
        repository.publish()
        with repo.serve_repository(repository, lifetime=3600) as served:
            for index in range(args.runs):
                for who in samples:
                    base = os.path.join(work, f"{index}-{who.split()[0]}")
                    root = fresh_root(base, "root")
                    try:
                        if who == "cloudseed":
                            sample = run_ours(root, served.url, repository)
                        else:
                            os.makedirs(os.path.join(base, "state"))
                            sample = run_reference(root, served.url, repository, os.path.join(base, "state"))
                    finally:
                        shutil.rmtree(base, ignore_errors=True)
                    sample["overhead"] = sample["total"] - sample["commands"]
                    samples[who].append(sample)
                    print(f"run {index + 1} {who:16s} module {sample['total'] * 1000:7.1f} ms  apt-get "
                          f"{sample['commands'] * 1000:7.1f} ms  overhead {sample['overhead'] * 1000:6.1f} ms",
                          flush=True)
    finally:
        repository.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nmedians over {args.runs} runs (document: {json.dumps(DOCUMENT)})")
    for who, runs in samples.items():
        def med(key: str, runs=runs) -> float:
            return statistics.median(s[key] for s in runs) * 1000

        print(f"  {who:16s} module {med('total'):7.1f} ms  apt-get {med('commands'):7.1f} ms  "
              f"overhead {med('overhead'):6.1f} ms")
    ours = statistics.median(s["overhead"] for s in samples["cloudseed"]) * 1000
    print(f"target: cloudseed overhead < 100 ms: {'met' if ours < 100 else 'NOT met'} ({ours:.1f} ms)")


if __name__ == "__main__":
    main()
