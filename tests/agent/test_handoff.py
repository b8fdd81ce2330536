"""One agent process for the boot, the stage units as ordering points (issue 18).

``cloudseed boot --hand-off`` runs the local stage, says READY=1 on a real notify socket (as
systemd's ``Type=notify`` expects), and runs each later stage only when the unit's helper
(``cloudseed-stage``, the shell script the units run) asks; the helper exits with the stage's
code. When the process is gone, the helper runs the stage in a process of its own.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPER = os.path.join(REPO, "cloudseed", "data", "systemd", "cloudseed-stage")
CLI = os.path.join(REPO, ".venv", "bin", "cloudseed")
# block style: simple enough for the first stage's reader, so PyYAML is not loaded before preloading
MODULES = ("network:\n  config: disabled\ncloud_init_modules:\n  - write_files\n"
           "cloud_config_modules:\n  - write_files_deferred\ncloud_final_modules:\n  - final_message\n")
USER_DATA = ("#cloud-config\nwrite_files:\n  - {path: /etc/early, content: e}\n"
             "  - {path: /etc/late, content: l, defer: true}\n")


@pytest.fixture
def seeded(target):
    target.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES)
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-handoff\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data", USER_DATA)
    return target


@pytest.fixture
def notify(tmp_path):
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(60)
    yield path, sock
    sock.close()


def stages(root) -> dict:
    v1 = json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]
    return {k: bool((v1.get(k) or {}).get("finished")) for k in ("init-local", "init", "modules-config",
                                                                  "modules-final")}


def helper(root, stage: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "CLOUDSEED_ROOT": root.top, "CLOUDSEED_BIN": CLI}
    return subprocess.run(["/bin/sh", HELPER, stage], env=env, capture_output=True, text=True, timeout=120)


def start_boot(root, notify_path: str) -> subprocess.Popen:
    env = {**os.environ, "NOTIFY_SOCKET": notify_path}
    return subprocess.Popen([sys.executable, "-m", "cloudseed", "--root", root.top, "boot", "--hand-off"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_each_later_stage_runs_when_its_unit_asks_in_the_one_process(seeded, notify):
    root, (path, sock) = seeded, notify
    proc = start_boot(root, path)
    try:
        message = sock.recv(4096).decode()
        assert message.startswith("READY=1")
        assert stages(root) == {"init-local": True, "init": False, "modules-config": False, "modules-final": False}
        time.sleep(0.5)  # no unit has asked yet: the process waits
        assert stages(root)["init"] is False and proc.poll() is None
        pid = int(root.read_text("/run/cloudseed/gate/pid"))
        assert pid == proc.pid

        assert helper(root, "network").returncode == 0
        assert stages(root)["init"] and not stages(root)["modules-config"]
        assert root.read_text("/etc/early") == "e" and not root.exists("/etc/late")
        assert helper(root, "config").returncode == 0
        assert root.read_text("/etc/late") == "l"
        assert helper(root, "final").returncode == 0
        assert proc.wait(timeout=60) == 0
        assert all(stages(root).values())
        status = json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]
        assert {status[k].get("crashed") for k in ("init", "modules-config", "modules-final")} == {None}
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_the_unit_runs_its_stage_itself_when_the_process_is_gone(seeded, notify):
    root, (path, sock) = seeded, notify
    proc = start_boot(root, path)
    sock.recv(4096)
    assert helper(root, "network").returncode == 0
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    result = helper(root, "config")
    assert result.returncode == 0, result.stderr
    assert "ended before the config stage; running it here" in result.stderr
    assert root.read_text("/etc/late") == "l"
    assert stages(root)["modules-config"]


def test_a_stage_with_errors_fails_its_unit(seeded, notify):
    root, (path, sock) = seeded, notify
    root.write("/var/lib/cloud/seed/nocloud/user-data",
               "#cloud-config\nwrite_files:\n  - {path: /etc/x, content: x, owner: 'nosuchuser:root'}\n")
    proc = start_boot(root, path)
    try:
        sock.recv(4096)
        assert helper(root, "network").returncode == 1  # write_files failed: as `cloudseed init` exits
        assert helper(root, "config").returncode == 0 and helper(root, "final").returncode == 0
        assert proc.wait(timeout=60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


PRELOADED = ("cloudseed.agent.userdata", "yaml", "hashlib", "cloudseed.agent.modules.write_files",
             "cloudseed.agent.modules.write_files_deferred", "cloudseed.agent.modules.final_message")


def preload(root, ask_first: bool, raised: int = -5) -> tuple[list, list, list, bool, int]:
    """preload_later_stages in a fresh process, started at niceness ``raised`` (root only): (modules
    before, after, priorities set, restored, the niceness the network stage then runs at)."""
    code = f"""
import json, os, sys
from cloudseed.core.root import TargetRoot
from cloudseed.agent.boot.handoff import Gate
from cloudseed.agent.boot.performance import early_stage_priority, preload_later_stages
from cloudseed.agent.boot.stages import BootState
root = TargetRoot({root.top!r})
state = BootState.load(root)
gate = Gate(root)
gate.open()
if {ask_first!r}:
    root.write(gate.directory + "/network.go", "")
raised = {raised!r} if os.geteuid() == 0 else 0
os.setpriority(os.PRIO_PROCESS, 0, raised)
names = {PRELOADED!r}
before = sorted(m for m in names if m in sys.modules)
seen = []
real = os.setpriority
os.setpriority = lambda which, who, value: seen.append(value) or real(which, who, value)
preload_later_stages(state, gate)
after = sorted(m for m in names if m in sys.modules)
restored = os.getpriority(os.PRIO_PROCESS, 0) == raised
early_stage_priority()
print(json.dumps([before, after, seen, restored, os.getpriority(os.PRIO_PROCESS, 0)]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_later_stages_code_is_loaded_while_waiting_for_networking(seeded):
    """After READY the process imports what the later stages need (user-data processing and its
    regular expressions, the init modules at the ordinary priority; the config and final modules
    at niceness 10) and gets its raised priority back for the network stage."""
    before, after, seen, restored, network = preload(seeded, ask_first=False)
    assert before == []
    assert after == sorted(PRELOADED)
    assert restored
    if os.geteuid() == 0:
        assert seen == [0, 10, -5]  # ordinary, then idle-time only, then raised again for the stage
        assert network == -5


def test_on_a_provisioned_disk_nothing_before_the_network_stage_rises_above_niceness_10(seeded):
    """A reboot: the generator's drop-in starts the process at niceness 10 so that it does not slow
    udev's coldplug; preloading stays there, and the network stage (on sshd's path) runs at 0."""
    if os.geteuid() != 0:
        pytest.skip("changing priorities needs root")
    before, after, seen, restored, network = preload(seeded, ask_first=False, raised=10)
    assert after == sorted(PRELOADED) and restored
    assert seen == [0]  # preloading never rose above the starting 10; the 0 is the network stage
    assert network == 0


def test_preloading_stops_when_the_network_stage_is_asked_for(seeded):
    """Networking was quicker: the stage is not kept waiting for imports it would make itself."""
    before, after, seen, restored, _ = preload(seeded, ask_first=True)
    assert before == [] and after == [] and seen == [] and restored


def test_host_keys_and_the_read_ahead_start_after_ready(seeded, monkeypatch):
    """Networking waits for READY: a new instance's key generators and the read-ahead of the network
    stage's files start once it is sent, not before (issue 30: a first boot's critical path)."""
    from cloudseed.agent.boot import handoff, stage_local
    from cloudseed.agent.boot.stages import BootState, run_handed_off

    events: list[str] = []

    def ready(status: str = "") -> bool:
        events.append("ready")
        for stage in ("network", "config", "final"):  # every later unit asks at once
            seeded.write(f"/run/cloudseed/gate/{stage}.go", "")
        return True

    monkeypatch.setattr(handoff, "notify_ready", ready)
    monkeypatch.setattr(stage_local, "start_host_keys_early", lambda state: events.append("keys"))
    monkeypatch.setattr(stage_local, "prefetch_for_network_stage", lambda state: events.append("read-ahead"))
    assert run_handed_off(BootState.load(seeded)) == 0
    assert events == ["ready", "keys", "read-ahead"]
    events.clear()
    assert run_handed_off(BootState.load(seeded)) == 0  # a reboot: no keys to make
    assert events == ["ready", "read-ahead"]


def test_when_the_gate_cannot_open_the_local_stage_runs_alone_and_each_unit_runs_its_own(seeded, notify,
                                                                                           monkeypatch):
    """A full /run: the gate's files cannot be written (the error the kernel gives, raised where the
    gate writes them). The boot's process runs the local stage, says READY with why, and ends; each
    later unit's helper then finds no process to hand to and runs its stage itself."""
    import errno

    from cloudseed.agent.boot import handoff
    from cloudseed.agent.boot.stages import BootState, run_handed_off

    def full(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", self.directory)

    monkeypatch.setattr(handoff.Gate, "open", full)
    monkeypatch.setenv("NOTIFY_SOCKET", notify[0])
    assert run_handed_off(BootState.load(seeded)) == 0
    assert notify[1].recv(4096).decode() == "READY=1\nSTATUS=local stage done; later stages in their own units"
    assert stages(seeded) == {"init-local": True, "init": False, "modules-config": False, "modules-final": False}
    assert not seeded.exists("/run/cloudseed/gate")
    for stage in ("network", "config", "final"):
        result = helper(seeded, stage)
        assert result.returncode == 0, result.stderr
        assert "ended before" not in result.stderr  # no process was ever named: nothing to hand to
    assert all(stages(seeded).values()) and seeded.read_text("/etc/late") == "l"


def _waiting_helper(root, stage: str, agent_pid: int, look: float, bin_path: str = CLI) -> subprocess.Popen:
    """The stage's helper, started against a gate whose agent is ``agent_pid``, once it has asked."""
    from cloudseed.agent.boot.handoff import Gate

    gate = Gate(root)
    gate.open()
    root.write(f"{gate.directory}/pid", f"{agent_pid}\n")
    env = {"PATH": os.environ["PATH"], "CLOUDSEED_ROOT": root.top, "CLOUDSEED_BIN": bin_path,
           "CLOUDSEED_STAGE_LOOK": str(look)}
    proc = subprocess.Popen(["/bin/sh", HELPER, stage], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 30
    while root.read_text(f"{gate.directory}/{stage}.go", default="").strip() != str(proc.pid):
        assert time.monotonic() < deadline and proc.poll() is None, "the helper never asked for its stage"
        time.sleep(0.05)
    return proc


def test_the_verdict_wakes_the_waiting_unit_at_once(target):
    """The helper looks for the verdict only every CLOUDSEED_STAGE_LOOK seconds (1 at boot; 60 here),
    starting one process per look instead of one every 50 ms: the agent's signal (to the PID the
    helper wrote in STAGE.go) ends its wait as soon as the verdict is written."""
    from cloudseed.agent.boot.handoff import Gate

    proc = _waiting_helper(target, "config", os.getpid(), look=60)
    try:
        time.sleep(0.5)  # the helper is in its wait now
        assert proc.poll() is None
        started = time.monotonic()
        Gate(target).done("config", 3)
        assert proc.wait(timeout=30) == 3
        assert time.monotonic() - started < 30  # far sooner than its next look, 60 s away
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_the_verdict_signals_no_process_but_the_stage_helper(target):
    """STAGE.go names a process that is not the stage's helper (a PID reused, a file tampered with):
    SIGUSR1 would end it, so the agent sends nothing and the helper would find the verdict itself."""
    from cloudseed.agent.boot.handoff import Gate

    gate = Gate(target)
    gate.open()
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        for stage in ("network", "final"):
            target.write(f"{gate.directory}/{stage}.go", f"{bystander.pid}\n")
            gate.done(stage, 0)
        time.sleep(0.5)
        assert bystander.poll() is None, "SIGUSR1 went to a process that is not the stage's helper"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_waiting_unit_notices_the_agent_gone_and_runs_its_stage_itself(target):
    """The agent dies while the unit waits for its verdict: at its next look (every second at boot) the
    helper finds it gone and runs the stage in a process of its own (here a stand-in that exits 0)."""
    agent = subprocess.Popen(["sleep", "60"])
    try:
        proc = _waiting_helper(target, "final", agent.pid, look=0.2, bin_path="/bin/true")
        agent.kill()
        agent.wait()
        assert proc.wait(timeout=30) == 0
        assert "ended before the final stage; running it here" in proc.stderr.read()
    finally:
        agent.kill()
        agent.wait()


def _asking_helper(root, stage: str) -> subprocess.Popen:
    """The real helper asking for ``stage`` of the gate this test opened (its agent: the test process;
    its own look every 60 s; a stage it would run itself fails)."""
    env = {"PATH": os.environ["PATH"], "CLOUDSEED_ROOT": root.top, "CLOUDSEED_BIN": "/bin/false",
           "CLOUDSEED_STAGE_LOOK": "60"}
    return subprocess.Popen(["/bin/sh", HELPER, stage], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _answered(gate, stage: str, proc: subprocess.Popen) -> tuple[int, str]:
    """Verdict 0 for the waiting helper ``proc``: its exit code and what it said (killed if it hangs)."""
    try:
        gate.done(stage, 0)
        return proc.wait(timeout=30), proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_the_agent_waits_on_the_fifo_and_the_helper_wakes_it_at_once(target, monkeypatch):
    """The agent no longer polls for STAGE.go every 20 ms (issue 30: 10 ms late on average, on the
    way to the final message): it waits on the gate's FIFO, which the real helper writes a line to
    after dropping STAGE.go. Its own look is made 60 s here, so only the helper's line can end the
    wait in time; the helper then gets its verdict as before."""
    import stat
    import threading

    from cloudseed.agent.boot import handoff

    monkeypatch.setattr(handoff, "LOOK_SECONDS", 60)
    gate = handoff.Gate(target)
    gate.open()
    fifo = os.lstat(target.path("/run/cloudseed/gate/wake"))
    assert stat.S_ISFIFO(fifo.st_mode) and stat.S_IMODE(fifo.st_mode) == 0o600 and gate.wake_fd is not None
    woke: list[float] = []
    waiter = threading.Thread(target=lambda: (gate.wait_for("final"), woke.append(time.monotonic())), daemon=True)
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive()  # nothing asked yet: the agent waits
    started = time.monotonic()
    proc = _asking_helper(target, "final")
    try:
        waiter.join(timeout=30)
        assert woke and woke[0] - started < 30, "the helper's line did not wake the agent"
        assert target.read_text("/run/cloudseed/gate/final.go").strip() == str(proc.pid)
    finally:
        assert _answered(gate, "final", proc) == (0, "")
    with pytest.raises(BlockingIOError):  # the helper's line was read: the next wait starts empty
        os.read(gate.wake_fd, 1)


def test_without_the_fifo_the_helper_writes_nothing_and_the_agent_still_finds_its_stage(target, monkeypatch):
    """A gate whose FIFO could not be made: the helper finds none (and creates no file in its place),
    and the agent finds STAGE.go by looking, every 20 ms as before."""
    from cloudseed.agent.boot import handoff

    monkeypatch.setattr(os, "mkfifo", lambda *args, **kwargs: (_ for _ in ()).throw(PermissionError(1, "denied")))
    gate = handoff.Gate(target)
    gate.open()
    assert gate.wake_fd is None and not os.path.lexists(target.path("/run/cloudseed/gate/wake"))
    proc = _asking_helper(target, "config")
    try:
        gate.wait_for("config")
        assert not os.path.lexists(target.path("/run/cloudseed/gate/wake"))
    finally:
        assert _answered(gate, "config", proc) == (0, "")
