"""Small boot-path promises: install's --root after the verb, /etc/hostname's mode, the boot's command line read
without argparse (issues 18 and 30)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time

import pytest

from cloudseed.agent.boot.stages import Agent
from cloudseed.cli import BOOT_UNIT_COMMAND_LINES, _boot_unit_args, parse_command_line

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_install_accepts_root_after_the_verb(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "install", "--root", str(tmp_path), "--no-compile"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "usr/lib/systemd/system/cloudseed-local.service").exists()
    assert os.access(tmp_path / "usr/lib/systemd/system-generators/cloudseed-generator", os.X_OK)


def test_hostname_file_is_written_0644_whatever_the_image_had(target):
    root = target
    root.write("/etc/hostname", "image\n", mode=0o755)  # as the lab image ships it
    root.write("/etc/cloudseed/cloud.cfg.d/00.cfg", "network: {config: disabled}\ncloud_init_modules: [set_hostname]\n"
               "cloud_config_modules: []\ncloud_final_modules: []\n")
    root.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-host\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", "#cloud-config\nhostname: named\n")
    assert Agent(root).run_all() == 0
    assert root.read_text("/etc/hostname") == "named\n"
    assert stat.S_IMODE(root.stat("/etc/hostname").st_mode) == 0o644


def _boot(root) -> int:
    import shutil

    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)  # /run is empty at every boot
    return Agent(root).run_all()


def _instance_id(root) -> str | None:
    import json

    return json.loads(root.read_text("/run/cloudseed/instance-data.json"))["v1"]["instance_id"]


def test_a_reboot_of_the_same_instance_searches_no_datasource(target):
    """SMBIOS UUID equal to the cached instance id: the reboot uses the cache; the service can be gone."""
    from tests.agent.openstack_service import IID, SYSTEM_CFG, serve

    root = target
    root.write("/sys/class/dmi/id/product_uuid", IID.upper() + "\n")
    with serve() as url:
        root.write("/etc/cloudseed/cloud.cfg.d/50-test.cfg", SYSTEM_CFG % url)
        assert _boot(root) == 0
        assert _instance_id(root) == IID
    # the service is gone now: a search would find nothing
    root.write("/etc/cloudseed/cloud.cfg.d/50-test.cfg", (SYSTEM_CFG % url).replace("max_wait: 5", "max_wait: 0.5"))
    assert _boot(root) == 0
    assert _instance_id(root) == IID
    status = __import__("json").loads(root.read_text("/run/cloudseed/status.json"))["v1"]
    assert status["datasource"] == "OpenStack" and status["init"]["warnings"] == []


def test_another_uuid_means_a_search(target):
    from tests.agent.openstack_service import IID, SYSTEM_CFG, serve

    root = target
    root.write("/sys/class/dmi/id/product_uuid", IID + "\n")
    with serve() as url:
        root.write("/etc/cloudseed/cloud.cfg.d/50-test.cfg", SYSTEM_CFG % url)
        assert _boot(root) == 0
    root.write("/sys/class/dmi/id/product_uuid", "00000000-1111-2222-3333-444444444444\n")
    root.write("/etc/cloudseed/cloud.cfg.d/50-test.cfg", (SYSTEM_CFG % url).replace("max_wait: 5", "max_wait: 0.5"))
    _boot(root)
    assert _instance_id(root) != IID  # searched, found no service: the None datasource


BOOT_WITHOUT_CRYPTOGRAPHY = """
import json, sys
from cloudseed.core.root import TargetRoot
from cloudseed.agent.boot.stages import Agent
root = TargetRoot(sys.argv[1])
status = Agent(root).run_all()
print(json.dumps({"status": status, "loaded": sorted(m for m in sys.modules
                                                     if m.split(".")[0] in ("cryptography", "_cffi_backend"))}))
"""


def test_a_whole_boot_never_imports_cryptography(target):
    """cryptography (pyca) signs the server's identity documents; the agent's boot path, all four
    stages of a NoCloud instance with user-data, SSH keys and a password, never loads it."""
    import json

    target.write("/etc/cloudseed/cloud.cfg.d/00.cfg", "network: {config: disabled}\n")
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-nocrypto\nlocal-hostname: plain\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data",
                 "#cloud-config\nhostname: plain\nssh_authorized_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK k']\n"
                 "write_files: [{path: /etc/motd, content: hi}]\n")
    proc = subprocess.run([sys.executable, "-c", BOOT_WITHOUT_CRYPTOGRAPHY, target.top], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["loaded"] == [], got
    assert target.read_text("/etc/motd") == "hi"


@pytest.mark.parametrize("line", BOOT_UNIT_COMMAND_LINES, ids=" ".join)
def test_the_boot_units_command_line_reads_as_argparse_reads_it(line):
    """``cloudseed boot [--hand-off]`` is read without argparse at boot: the same arguments."""
    fast = _boot_unit_args(list(line))
    module, parsed, verb, root = parse_command_line(list(line))
    assert vars(fast) == vars(parsed)
    assert (module.__name__, verb, root) == ("cloudseed.commands.boot", "boot", "/")


@pytest.mark.parametrize("line", [["boot", "--hand-off", "--debug"], ["--debug", "boot"], ["boot", "--root", "/x"],
                                  ["--root=/x", "boot", "--hand-off"], ["boot", "--hand"], ["init", "--local"]])
def test_any_other_command_line_is_argparse_s(line):
    assert _boot_unit_args(line) is None


BOOT_ARGS_WITHOUT_ARGPARSE = """
import sys
from cloudseed.cli import _boot_unit_args
args = _boot_unit_args(["boot", "--hand-off"])
import cloudseed.commands.boot
print(sorted(m for m in ("argparse", "gettext", "shutil") if m in sys.modules), args.hand_off)
"""


def test_the_boot_process_reads_its_command_line_without_importing_argparse():
    proc = subprocess.run([sys.executable, "-c", BOOT_ARGS_WITHOUT_ARGPARSE], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "True"]


def test_an_include_once_cache_name_is_the_urls_md5():
    from cloudseed.agent.userdata.includes import cache_file_name

    assert cache_file_name("http://example.test/a") == "e63357d43f8fc6cf43de34fd9323f9bf"


def _ask_for_the_later_stages(target) -> None:
    """Run the network, config and final units' command (cloudseed-stage), one after the other."""
    for stage in ("network", "config", "final"):
        helper = subprocess.run(["/bin/sh", os.path.join(REPO, "cloudseed/data/systemd/cloudseed-stage"), stage],
                                env={"PATH": os.environ["PATH"], "CLOUDSEED_ROOT": target.top,
                                     "CLOUDSEED_BIN": os.path.join(REPO, ".venv/bin/cloudseed")},
                                capture_output=True, text=True, timeout=120)
        assert helper.returncode in (0, 1), helper.stderr


AT_READY = """
import importlib, sys
from types import SimpleNamespace
from cloudseed import cli
from cloudseed.agent.boot import handoff
top, out = sys.argv[1], sys.argv[2]
said = handoff.notify_ready

def ready(status=""):  # what the process has imported once it has told systemd READY=1
    sent = said(status)
    with open(out, "w") as handle:
        handle.write("\\n".join(sorted(sys.modules)))
    return sent

handoff.notify_ready = ready
# cli.main's path for the unit's command line (``_boot_unit_args``), on the test's root
args = SimpleNamespace(root=top, debug=0, version=False, verb="boot", hand_off=True)
sys.exit(cli._run(importlib.import_module("cloudseed.commands.boot"), args, "boot", "/"))
"""
# what the reboot's local stage of an unchanged instance does without (docs/lab.md, "How the agent sits in
# the boot"): each is imported when used, after READY=1 at the earliest
NOT_BEFORE_READY = ("subprocess", "signal", "selectors", "socket", "shutil", "bz2", "lzma", "tempfile", "random",
                    "dataclasses", "inspect", "argparse", "yaml", "cloudseed.network.renderers",
                    "cloudseed.agent.boot.performance")


def test_the_reboots_local_stage_imports_nothing_it_does_not_use_before_ready(target, tmp_path):
    """The hand-off boot's process on the reboot of an unchanged instance, as its unit runs it: at
    READY=1 none of NOT_BEFORE_READY is loaded, and the later stages still run when their units ask."""
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-ready\nlocal-hostname: ready\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data", "#cloud-config\nwrite_files: [{path: /etc/r, content: r}]\n")
    assert _boot(target) in (0, 1)  # the first boot (no useradd in a bare root: an error, not a crash)
    import shutil

    shutil.rmtree(os.path.join(target.top, "run"))  # the reboot: /run is empty
    out, notify = str(tmp_path / "ready.txt"), str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify)
    sock.settimeout(120)
    proc = subprocess.Popen([sys.executable, "-c", AT_READY, target.top, out], cwd=REPO,
                            env={**os.environ, "NOTIFY_SOCKET": notify},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert sock.recv(4096).startswith(b"READY=1")  # the gate is open
        deadline = time.monotonic() + 60
        while not os.path.exists(out) and time.monotonic() < deadline:
            time.sleep(0.02)
        _ask_for_the_later_stages(target)  # as the units ask, once the local stage is done
        proc.wait(timeout=120)
    finally:
        proc.kill()
        sock.close()
    with open(out) as handle:
        loaded = set(handle.read().split())
    assert "cloudseed.agent.boot.stage_local" in loaded and "json" in loaded
    assert sorted(m for m in loaded if m in NOT_BEFORE_READY or m.startswith(NOT_BEFORE_READY)) == []
    status = __import__("json").loads(target.read_text("/run/cloudseed/status.json"))["v1"]
    assert all(status[k].get("finished") for k in ("init-local", "init", "modules-config", "modules-final"))
    reboot = [line for line in target.read_text("/var/log/cloudseed.log").splitlines() if f"[{proc.pid}]" in line]
    assert any("not a new instance" in line for line in reboot)  # the reboot's local stage wrote no network


IN_THE_NETWORK_STAGE = """
import importlib, sys
from types import SimpleNamespace
from cloudseed import cli
from cloudseed.agent.boot import performance, stages
top, preloaded, out = sys.argv[1], sys.argv[2], sys.argv[3]
preload, network = performance.preload_later_stages, stages.run_network

def preload_then_say(*a, **k):  # the test asks for the network stage once the preloading is over
    try:
        return preload(*a, **k)
    finally:
        open(preloaded, "w").close()

def network_stage(state):  # what the stage itself imports
    before = set(sys.modules)
    try:
        return network(state)
    finally:
        with open(out, "w") as handle:
            handle.write("\\n".join(sorted(set(sys.modules) - before)))

performance.preload_later_stages, stages.run_network = preload_then_say, network_stage
args = SimpleNamespace(root=top, debug=0, version=False, verb="boot", hand_off=True)
sys.exit(cli._run(importlib.import_module("cloudseed.commands.boot"), args, "boot", "/"))
"""


def test_the_reboots_network_stage_imports_nothing_the_preloading_could_have(target, tmp_path):
    """On a reboot the network stage runs beside sshd's start: what it needs at every boot (a
    command's subprocess, the check for a cut-off host key) is imported while networking comes up.
    Regression: the host-key check had put hostkeys, shutil, bz2 and lzma there at every boot."""
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-net\nlocal-hostname: net\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data", "#cloud-config\nbootcmd: [\"true\"]\n")
    assert _boot(target) in (0, 1)
    import shutil

    shutil.rmtree(os.path.join(target.top, "run"))
    preloaded, out = str(tmp_path / "preloaded"), str(tmp_path / "network.txt")
    proc = subprocess.Popen([sys.executable, "-c", IN_THE_NETWORK_STAGE, target.top, preloaded, out], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(preloaded) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        _ask_for_the_later_stages(target)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    with open(out) as handle:
        imported = set(handle.read().split())
    late = sorted(m for m in imported if m in ("subprocess", "shutil", "bz2", "lzma", "cloudseed.agent.hostkeys"))
    assert late == [], f"imported by the network stage itself, beside sshd's start: {late}"
