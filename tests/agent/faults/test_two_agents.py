"""Two agents on one root: one at a time (the per-root lock), each with its expected outcome.

A second agent waits for the first and then does its own work (a second ``init`` runs the per-boot
bootcmd again, after the first; a per-instance module runs once), or gives up after its bounded
wait naming the holder; two agents that are PID 1 in their own PID namespaces never share a
temporary file name.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.agent.faults import fault_support as fs


def both(root, *args: str, env: dict | None = None, stagger: float = 0.1) -> list[subprocess.CompletedProcess]:
    """Start the same agent command twice, ``stagger`` seconds apart; both results."""
    first = fs.start_agent(root, *args, env=env)
    time.sleep(stagger)
    second = fs.start_agent(root, *args, env=env)
    results = []
    for proc in (first, second):
        out, err = proc.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def passwd_lines(root, name: str) -> int:
    return sum(1 for line in root.read_text("/etc/passwd").splitlines() if line.startswith(f"{name}:"))


def test_two_inits_at_once_run_one_after_the_other(fault_root, clean_boot):
    fs.new_boot(fault_root)
    assert fs.agent(fault_root, "init", "--local").returncode == 0
    results = both(fault_root, "init", env={"BOOTCMD_SLEEP": "0.5"})
    for proc in results:
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert any("waiting up to" in p.stderr for p in results)        # the second said whom it waited for
    assert fs.runs(fault_root, fs.BOOTCMD_LOG) == [True, True]        # per boot, so twice, never at once
    assert passwd_lines(fault_root, "fiuser") == 1
    for stage in ("config", "final"):
        assert fs.agent(fault_root, "modules", "--mode", stage).returncode == 0
    assert fs.fingerprint(fault_root) == clean_boot["fingerprint"]  # same ids, owners, files as one init


def test_two_final_stages_at_once_run_runcmd_once(root_after, clean_boot):
    root = root_after("network")
    assert fs.agent(root, "modules", "--mode", "config").returncode == 0
    results = both(root, "modules", "--mode", "final", env={"RUNCMD_SLEEP": "0.5"})
    assert [p.returncode for p in results] == [0, 0], [p.stderr for p in results]
    assert fs.runs(root, fs.RUNCMD_LOG) == [True]
    assert fs.fingerprint(root) == clean_boot["fingerprint"]


def test_two_whole_boots_at_once(fault_root, clean_boot):
    fs.new_boot(fault_root)
    results = both(fault_root, "boot", env={"BOOTCMD_SLEEP": "0.3"})
    assert [p.returncode for p in results] == [0, 0], [p.stderr for p in results]
    assert fs.runs(fault_root, fs.BOOTCMD_LOG) == [True, True]
    assert fs.runs(fault_root, fs.RUNCMD_LOG) == [True]
    assert passwd_lines(fault_root, "fiuser") == 1
    assert fs.fingerprint(fault_root) == clean_boot["fingerprint"]
    assert fs.leftover_temporaries(fault_root) == []


def test_a_second_agent_gives_up_after_its_wait_naming_the_holder(fault_root):
    fs.new_boot(fault_root)
    first = fs.start_agent(fault_root, "boot", env={"BOOTCMD_SLEEP": "3"})
    try:
        fs.wait_for_holder(fault_root, "boot")
        started = time.monotonic()
        second = fs.agent(fault_root, "single", "--name", "set_hostname", env={"CLOUDSEED_LOCK_WAIT": "0.5"})
        assert time.monotonic() - started < 2.5
        assert second.returncode == 1
        assert f"another cloudseed is changing this system (pid {first.pid}: boot, since" in second.stderr, \
            second.stderr
        assert "waited 0.5s, nothing was done" in second.stderr
    finally:
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert fs.runs(fault_root, fs.BOOTCMD_LOG) == [True]


def test_verbs_that_change_the_system_wait_for_the_lock_too(fault_root):
    fs.new_boot(fault_root)
    first = fs.start_agent(fault_root, "boot", env={"BOOTCMD_SLEEP": "3"})
    try:
        fs.wait_for_holder(fault_root, "boot")
        for verb in (("clean",), ("init",), ("modules", "--mode", "final")):
            proc = fs.agent(fault_root, *verb, env={"CLOUDSEED_LOCK_WAIT": "0.2"})
            assert proc.returncode == 1 and "another cloudseed is changing this system" in proc.stderr, verb
        assert fault_root.exists("/var/lib/cloudseed/instance")      # clean removed nothing
    finally:
        first.communicate(timeout=60)
    assert first.returncode == 0


def test_a_cloudseed_started_by_the_holder_runs_inside_its_lock(fault_root):
    """``cloud-init single`` in a runcmd: a child of the holder goes ahead instead of waiting for its parent."""
    holder = textwrap_code(f"""
        import os, subprocess, sys
        from cloudseed.agent.boot.lock import AgentLock
        from cloudseed.core.root import TargetRoot
        lock = AgentLock(TargetRoot({fault_root.top!r}), "final stage")
        lock.acquire()
        cmd = [sys.executable, "-m", "cloudseed", "--root", {fault_root.top!r}, "single", "--name", "set_hostname"]
        env = dict(os.environ, CLOUDSEED_LOCK_WAIT="0.3")
        child = subprocess.run(cmd, env=env, capture_output=True, text=True)
        outsider = dict(env)
        outsider.pop("CLOUDSEED_LOCK_HELD")
        other = subprocess.run(cmd, env=outsider, capture_output=True, text=True)
        print(child.returncode, other.returncode)
        print(other.stderr)
        """)
    proc = subprocess.run([sys.executable, "-c", holder], capture_output=True, text=True, timeout=60)
    codes, _, stderr = proc.stdout.partition("\n")
    assert codes == "0 1", proc.stdout + proc.stderr
    assert "another cloudseed is changing this system (pid" in stderr and ": final stage, since" in stderr


def test_two_agents_that_are_pid_1_in_their_own_namespaces(fault_root, clean_boot):
    """Containers sharing a root: both agents are PID 1; the lock and the temporary names still hold."""
    # both containers alive at once, as agents sharing a root are: the kernel reuses a namespace's
    # inode number once that namespace is gone, so one after the other may show the same number
    show = ("import os, sys; from cloudseed.core.root import writer_tag; print(os.getpid(), writer_tag(), "
            "flush=True); sys.stdin.read()")
    first = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", show],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        tag = first.stdout.readline().split()
        assert tag[0] == "1" and tag[1].startswith("1-")
        other = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                                "from cloudseed.core.root import writer_tag; print(writer_tag())"],
                               capture_output=True, text=True, check=True).stdout.strip()
    finally:
        first.communicate("", timeout=30)
    assert other.startswith("1-") and other != tag[1]                  # PID 1 both, different names

    fs.new_boot(fault_root)
    argv = fs.agent_argv(fault_root, "boot")
    env = {**os.environ, "BOOTCMD_SLEEP": "0.3"}
    procs = [subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", *argv], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _out, err in outputs]
    assert fs.runs(fault_root, fs.BOOTCMD_LOG) == [True, True]
    assert fs.fingerprint(fault_root) == clean_boot["fingerprint"]
    assert fs.leftover_temporaries(fault_root) == []


def textwrap_code(code: str) -> str:
    import textwrap

    return textwrap.dedent(code)
