"""What the fault suite shares: one instance's seed, the agent run as a user's boot would run it, and
the state a boot leaves, compared with a clean boot's.

The agent runs as its own process (``python -m cloudseed --root ROOT ...``) under
``setpriv --bounding-set -sys_time,-sys_module,-sys_boot``: the scripts from user-data it runs
share this machine's clock and kernel, so they get none of those capabilities. Each "boot" starts
with an empty ``/run``, as after a real reboot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

# the extended set: every disk level, 50 kills at random points (the default runs a handful of each)
EXTENDED = os.environ.get("CLOUDSEED_FAULTS", "") == "all"

SEED = "/var/lib/cloud/seed/nocloud"
BOOTCMD_LOG = "/var/tmp/bootcmd-runs"
RUNCMD_LOG = "/var/tmp/runcmd-runs"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE8+SGUx2YvS64/fSXgfms5RWFi5eKtbWHB+x04sTANT fault@test"
DROP_CAPS = ("setpriv", "--bounding-set", "-sys_time,-sys_module,-sys_boot")

SYSTEM_CFG = """\
network: {config: disabled}
ssh_genkeytypes: [ed25519]
cloud_init_modules: [bootcmd, write_files, set_hostname, users_groups, ssh]
cloud_config_modules: [set_passwords, timezone, runcmd]
cloud_final_modules: [write_files_deferred, scripts_user, final_message]
"""

USER_DATA = textwrap.dedent(f"""\
    #cloud-config
    hostname: faulty
    bootcmd:
      - echo "start $$" >> {BOOTCMD_LOG}; sleep "${{BOOTCMD_SLEEP:-0}}"; echo "end $$" >> {BOOTCMD_LOG}
    groups: [ops]
    users:
      - name: fiuser
        groups: [ops]
        shell: /bin/bash
        sudo: "ALL=(ALL) NOPASSWD:ALL"
        ssh_authorized_keys: ["{KEY}"]
    ssh_pwauth: true
    timezone: Europe/Paris
    write_files:
      - path: /etc/fault/app.conf
        content: "listen = 8080\\n"
        permissions: "0640"
      - path: /etc/fault/appended.log
        content: "appended once\\n"
        append: true
      - path: /home/fiuser/deferred.txt
        content: "deferred\\n"
        owner: fiuser:fiuser
        defer: true
    runcmd:
      - echo "start $$" >> {RUNCMD_LOG}; sleep "${{RUNCMD_SLEEP:-0}}"; echo "end $$" >> {RUNCMD_LOG}
    """)


def seed(root, user_data: str = USER_DATA, system_cfg: str = SYSTEM_CFG, instance_id: str = "iid-faults") -> None:
    root.write("/etc/cloudseed/cloud.cfg.d/00-faults.cfg", system_cfg)
    root.write(f"{SEED}/meta-data", f"instance-id: {instance_id}\n")
    root.write(f"{SEED}/user-data", user_data)
    os.makedirs(root.path("/run/sshd"), exist_ok=True)


def new_boot(root) -> None:
    """What a reboot does to the agent's view: ``/run`` is empty again (a fresh tmpfs)."""
    run = root.path("/run")
    for name in os.listdir(run):
        path = os.path.join(run, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    os.makedirs(root.path("/run/sshd"), exist_ok=True)


def agent_argv(root, *args: str) -> list[str]:
    return [*DROP_CAPS, sys.executable, "-m", "cloudseed", "--root", root.top, *args]


def agent(root, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``cloudseed --root ROOT ARGS`` as a boot runs it (capabilities dropped)."""
    return subprocess.run(agent_argv(root, *args), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def start_agent(root, *args: str, env: dict | None = None) -> subprocess.Popen:
    """The agent started in a session of its own (``kill_all`` ends it with its scripts, as systemd would)."""
    return subprocess.Popen(agent_argv(root, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)


def wait_for_holder(root, what: str, timeout: float = 60) -> str:
    """The lock holder's line once an agent running ``what`` holds the root's lock (a loaded machine
    starts Python slowly: never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = root.read_text("/var/lib/cloudseed/lock", default="")
        if f": {what}, since" in text:
            return text.strip()
        time.sleep(0.02)
    raise AssertionError(f"no agent running {what} took the lock in {timeout}s")


def kill_all(proc: subprocess.Popen) -> None:
    """``kill -9`` of the agent and everything it started (its process group)."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()
    for _ in range(500):  # until the last of them is gone (one in the middle of an fsync dies a little later)
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def status(root, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """``cloudseed status`` (a read-only verb: it runs no script, so no capability is dropped)."""
    return subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, "status", *args],
                          capture_output=True, text=True, timeout=timeout)


def status_json(root) -> dict:
    proc = status(root, "--long", "--format", "json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def status_here(root, *args: str) -> tuple[int, str]:
    """``cloudseed status ARGS`` in this process (the verb's own code, without a process start): (exit, output)."""
    import contextlib
    import io

    from cloudseed.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--root", root.top, "status", *args])
    return code, out.getvalue()


def boot(root, **kw) -> subprocess.CompletedProcess:
    new_boot(root)
    return agent(root, "boot", **kw)


def _file(root, inner: str) -> dict | None:
    host = root.path(inner)
    if not os.path.lexists(host):
        return None
    info = os.lstat(host)
    out = {"mode": oct(info.st_mode & 0o7777), "uid": info.st_uid, "gid": info.st_gid}
    if os.path.isfile(host):
        with open(host, "rb") as f:
            out["content"] = f.read().decode("utf-8", "replace")
    return out


def _entry(root, db: str, name: str) -> list[str] | None:
    for line in root.read_text(db, default="").splitlines():
        fields = line.split(":")
        if fields[0] == name:
            return fields
    return None


def _without_stamp(found: dict | None) -> dict | None:
    """A generated file without its "# Created by ... on DATE" line (the date differs from boot to boot)."""
    if found and "content" in found:
        found["content"] = "".join(line for line in found["content"].splitlines(True)
                                   if not line.startswith("# Created by cloudseed"))
    return found


def fingerprint(root) -> dict:
    """What the instance looks like to its user after a boot (not when or how often scripts ran)."""
    passwd = _entry(root, "/etc/passwd", "fiuser")
    shadow = _entry(root, "/etc/shadow", "fiuser")
    return {
        "passwd": passwd,
        "group": _entry(root, "/etc/group", "fiuser"),
        "ops": _entry(root, "/etc/group", "ops"),
        "locked": bool(shadow) and shadow[1].startswith("!"),
        "home": _file(root, "/home/fiuser") and {k: v for k, v in _file(root, "/home/fiuser").items()},
        "authorized_keys": _file(root, "/home/fiuser/.ssh/authorized_keys"),
        "sudoers": _without_stamp(_file(root, "/etc/sudoers.d/90-cloudseed-users")),
        "hostname": root.read_text("/etc/hostname", default=""),
        "timezone": os.readlink(root.path_nofollow("/etc/localtime")) if root.islink("/etc/localtime") else None,
        "app.conf": _file(root, "/etc/fault/app.conf"),
        "appended.log": _file(root, "/etc/fault/appended.log"),
        "deferred": _file(root, "/home/fiuser/deferred.txt"),
        "sshd_pwauth": _file(root, "/etc/ssh/sshd_config.d/50-cloudseed.conf"),
        "host_key": root.exists("/etc/ssh/ssh_host_ed25519_key"),
        "runcmd_ran": root.exists(RUNCMD_LOG),
    }


def runs(root, inner: str) -> list[bool]:
    """The runs a bootcmd/runcmd logged ("start PID" ... "end PID"), each True when it finished.

    AssertionError when two ran at once (a run ended after another had started); a run that never
    ended (killed) is one entry, False.
    """
    done: list[bool] = []
    current = None
    for line in root.read_text(inner, default="").splitlines():
        word, _, pid = line.partition(" ")
        if word == "start":
            current = pid
            done.append(False)
        else:
            assert word == "end" and pid == current, f"runs overlapped in {inner}: {root.read_text(inner)!r}"
            done[-1] = True
            current = None
    return done


def leftover_temporaries(root) -> list[str]:
    """Temporary files of an atomic write still lying about (outside the agent's set-aside copies)."""
    found = []
    for top in ("/etc", "/home", "/root", "/var/lib/cloudseed", "/run/cloudseed"):
        for directory, _dirs, files in os.walk(root.path(top)):
            found += [os.path.join(directory, f) for f in files if ".cloudseed-" in f and f.endswith((".tmp", ".lnk"))]
    return found


def fill(filler: str, free: int) -> None:
    """Grow ``filler`` until its file system has ``free`` bytes left (tmpfs counts whole pages)."""
    info = os.statvfs(os.path.dirname(filler))
    available = info.f_bavail * info.f_frsize
    with open(filler, "wb") as handle:
        try:
            handle.write(bytes(max(0, available - free)))
        except OSError:
            pass
    info = os.statvfs(os.path.dirname(filler))
    assert info.f_bavail * info.f_frsize <= free + 4096
