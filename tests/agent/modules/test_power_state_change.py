"""power_state_change: the shutdown command, its delay, condition and timeout, run for real in a chroot.

On the running system the module starts a detached shell that waits for the agent process to
exit (at most ``timeout`` seconds), checks ``condition`` and then runs ``shutdown``. Here a child
process chroots into a busybox root whose ``shutdown`` only records its arguments, and runs the
module there, where that root is its live system: the waiting, the condition and the command are
the module's own, and nothing outside the temporary root is touched. On any other root the module
only says what it would run.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import time

import pytest

import cloudseed.agent.modules.power_state_change as power_state
from cloudseed.agent.modules import ModuleError
from tests.agent.modules.module_support import run

ARGS = "/tmp/shutdown.args"


def wait_until(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def chrooted(shell_target, caplog):
    """Runs the module in a forked child chrooted into ``shell_target`` (its live root there)."""
    shell_target.write("/bin/shutdown", f'#!/bin/sh\necho "$@" > {ARGS}\n', mode=0o755)
    os.makedirs(shell_target.path("/dev"), exist_ok=True)
    try:  # the helper's stdin and stdout
        os.mknod(shell_target.path("/dev/null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as e:
        pytest.skip(f"cannot make /dev/null in the temporary root: {e}")
    with caplog.at_level(logging.INFO):  # warm every import the run needs before leaving this filesystem
        run(shell_target, "power_state_change", {"power_state": {"mode": "halt"}}, stage="final")
    children = []

    def start(settings: dict, linger: float) -> int:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 3
            try:
                os.chroot(shell_target.top)
                os.chdir("/")
                from cloudseed.core.root import TargetRoot

                result, _ = run(TargetRoot("/"), "power_state_change", {"power_state": settings}, stage="final")
                code = 0 if result.status == "ok" else 1
                time.sleep(linger)
            finally:
                os._exit(code)
        children.append(pid)
        return pid

    yield shell_target, start
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def test_waits_for_the_agent_to_exit_then_runs_shutdown(chrooted):
    root, start = chrooted
    pid = start({"mode": "reboot", "delay": "+5", "message": "see you soon", "timeout": 30}, linger=2.0)
    time.sleep(1.2)
    assert not root.exists(ARGS), "shutdown ran while the agent was still running"
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert wait_until(lambda: root.exists(ARGS)), "shutdown never ran"
    assert root.read_text(ARGS) == "-r +5 see you soon\n"


def test_a_false_condition_stops_the_shutdown(chrooted):
    root, start = chrooted
    pid = start({"mode": "poweroff", "condition": "touch /tmp/condition-checked; false"}, linger=0.2)
    os.waitpid(pid, 0)
    assert wait_until(lambda: root.exists("/tmp/condition-checked")), "the condition was never checked"
    time.sleep(0.5)
    assert not root.exists(ARGS)


def test_the_timeout_bounds_the_wait_for_the_agent(chrooted):
    root, start = chrooted
    pid = start({"mode": "poweroff", "delay": 0, "timeout": 1, "condition": ["test", "-d", "/tmp"]}, linger=30)
    assert wait_until(lambda: root.exists(ARGS), timeout=10), "shutdown did not run after the timeout"
    assert os.waitpid(pid, os.WNOHANG) == (0, 0), "the agent process should still be running"
    assert root.read_text(ARGS) == "-P +0\n"


def test_an_offline_root_only_says_what_it_would_run(target, caplog, monkeypatch):
    started = []
    monkeypatch.setattr(type(target), "spawn", lambda *a, **k: started.append(a))
    with caplog.at_level(logging.INFO):
        result, _ = run(target, "power_state_change", {"power_state": {"mode": "poweroff", "message": "bye"}},
                        stage="final")
    assert result.status == "ok", result.reason
    assert started == []
    assert "offline root: would run shutdown -P now bye (condition: true)" in caplog.text


@pytest.mark.parametrize("settings,argv", [
    ({"mode": "poweroff"}, ["shutdown", "-P", "now"]),
    ({"mode": "halt", "delay": 30}, ["shutdown", "-H", "+30"]),
    ({"mode": "reboot", "delay": "+7", "message": "kernel update"}, ["shutdown", "-r", "+7", "kernel update"]),
    ({"mode": "reboot", "delay": " now "}, ["shutdown", "-r", "now"]),
])
def test_the_shutdown_command(settings, argv):
    assert power_state.shutdown_command(settings) == argv


@pytest.mark.parametrize("condition,script", [
    (None, "true"), (True, "true"), (False, "false"),
    (["test", "-f", "/run/app done"], "test -f '/run/app done'"),
    ("test -f /run/app/done", "test -f /run/app/done"),
])
def test_the_condition(condition, script):
    assert power_state.condition_script(condition) == script


@pytest.mark.parametrize("settings,reason", [
    ({"mode": "hibernate"}, "power_state.mode: 'hibernate' is not one of poweroff, halt, reboot"),
    ({"mode": "reboot", "delay": "soon"}, "power_state.delay: 'soon' is not 'now' or a number of minutes"),
    ({"mode": "reboot", "timeout": "long"}, "power_state.timeout: expected a number of seconds"),
    ("reboot", "power_state: expected a mapping with a mode"),
])
def test_bad_settings_are_named(target, settings, reason):
    result, _ = run(target, "power_state_change", {"power_state": settings}, stage="final")
    assert result.status == "failed" and result.reason == reason
    with pytest.raises(ModuleError):
        power_state.handle(type("Ctx", (), {"cfg": {"power_state": settings}})())

