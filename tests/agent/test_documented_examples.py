"""Every documented example of cloud-init 22.4 and of the newer release, applied to a real Debian root
through all four stages: no crash, no traceback.

The documents come from Debian's packages at test time (``tests/cloud_init_examples.py``): each
release's ``doc/examples`` (user-data of every format: cloud-config, scripts, includes, archives,
part-handlers...) and its module documentation's examples. Each is the user-data of a NoCloud seed
in a private overlay of the cached Debian bookworm tree, booted by ``cloudseed --root DIR boot`` with
the image's default module lists, as someone else's scripts are run here: without the capabilities
to set the clock, load modules or reboot the machine. Modules may fail (no network here, another
distribution's tool, a device that is not there) as long as it is a clear error in the status; a
stage that crashed, a module that failed with an unexpected exception, or a traceback anywhere
fails the test.

The default run boots the newest release's ``doc/examples`` (26.2: 37 boots, about a minute);
``CLOUDSEED_EXAMPLES=all`` boots all 346: 22.4's and 25.1's too, and their module documentation's
examples (about a quarter of an hour).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

CAPABILITIES_DROPPED = "-sys_time,-sys_module,-sys_boot"
ALL = os.environ.get("CLOUDSEED_EXAMPLES") == "all"
# the image: a NoCloud seed, and no retries of a package command that failed for want of a network
CONFIG = "datasource_list: [NoCloud]\npackage_retries: 0\n"
APT_OFFLINE = 'Acquire::Retries "0";\nAcquire::http::Timeout "1";\n'  # apt waits 7 s per failed update else


def _examples() -> dict[str, bytes]:
    if os.geteuid() != 0 or not shutil.which("debootstrap") or not shutil.which("setpriv"):
        return {}
    from tests import cloud_init_examples

    found = cloud_init_examples.user_data_examples()
    if ALL:
        return found
    # default: the newest release's doc/examples (every user-data format; the others' are nearly the same files)
    newest = max({k.split("/")[0] for k in found}, key=lambda v: tuple(int(n) for n in re.findall(r"\d+", v)))
    return {k: v for k, v in found.items() if k.startswith(f"{newest}/doc/")}


EXAMPLES = _examples()


@pytest.fixture(scope="module")
def base():
    from tests.agent.identity import debian_chroot

    top = tempfile.mkdtemp(prefix="cloudseed-examples-base-")
    try:
        yield debian_chroot.unpack(os.path.join(top, "root"))
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _boot(base: str, name: str, user_data: bytes) -> tuple[dict, str, str]:
    """(status v1, the agent's stderr, its log) of one boot of a fresh overlay with ``user_data``."""
    work = tempfile.mkdtemp(prefix="cloudseed-example-")
    merged, upper, scratch = (os.path.join(work, d) for d in ("root", "upper", "work"))
    for d in (merged, upper, scratch):
        os.makedirs(d)
    mounted = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                              f"lowerdir={base},upperdir={upper},workdir={scratch}", merged],
                             capture_output=True).returncode == 0
    try:
        if not mounted:
            shutil.copytree(base, merged, symlinks=True, dirs_exist_ok=True)
        seed = os.path.join(merged, "var/lib/cloud/seed/nocloud")
        os.makedirs(seed, exist_ok=True)
        os.makedirs(os.path.join(merged, "etc/cloudseed/cloud.cfg.d"), exist_ok=True)
        with open(os.path.join(merged, "etc/cloudseed/cloud.cfg.d/00-examples.cfg"), "w") as handle:
            handle.write(CONFIG)
        with open(os.path.join(seed, "meta-data"), "w") as handle:
            handle.write(f"instance-id: iid-{abs(hash(name)) % 10**8}\nlocal-hostname: example\n")
        with open(os.path.join(seed, "user-data"), "wb") as handle:
            handle.write(user_data)
        with open(os.path.join(merged, "etc/apt/apt.conf.d/99-no-network"), "w") as handle:
            handle.write(APT_OFFLINE)
        # no network at all (a namespace of its own): what needs one fails at once, as it would offline
        proc = subprocess.run(["unshare", "--net", "setpriv", "--bounding-set", CAPABILITIES_DROPPED, sys.executable,
                               "-m", "cloudseed", "--root", merged, "boot"], cwd=REPO, capture_output=True, text=True,
                              timeout=300)
        status_path = os.path.join(merged, "run/cloudseed/status.json")
        v1 = json.loads(_read(status_path) or "{}").get("v1", {})
        log = _read(os.path.join(merged, "var/log/cloudseed.log"))
        return v1, proc.stderr, log
    finally:
        if mounted:
            subprocess.run(["umount", "-l", merged], check=False)
        shutil.rmtree(work, ignore_errors=True)


def _read(path: str) -> str:
    if not os.path.exists(path):
        return ""
    with open(path, errors="replace") as handle:
        return handle.read()


@pytest.mark.skipif(not EXAMPLES, reason="needs root, debootstrap, setpriv and Debian's cloud-init packages")
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_documented_example_boots_without_a_crash(base, name):
    v1, stderr, log = _boot(base, name, EXAMPLES[name])
    assert v1, f"no status written:\n{stderr[-3000:]}"
    assert "Traceback" not in stderr, stderr[-4000:]
    assert "Traceback" not in log, log[log.index("Traceback") - 500:][:4000]
    stages = ("init-local", "init", "modules-config", "modules-final")
    crashed = {s: v1[s]["crashed"] for s in stages if (v1.get(s) or {}).get("crashed")}
    assert not crashed, crashed
    for stage in stages:
        assert (v1.get(stage) or {}).get("finished"), f"the {stage} stage did not finish: {v1.get(stage)}"
