"""SSH host keys: generate the missing key types side by side, read the public halves back.

Each type is one ``ssh-keygen`` process; they run concurrently (RSA dominates, the others finish
while it works), so the boot waits for the slowest key instead of the sum of all. The command runs
in the target when it has ``ssh-keygen``; for an offline root without one, the host's
``ssh-keygen`` writes into the root's ``/etc/ssh``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from cloudseed.core.root import CommandError, TargetRoot, run_on_machine

KEY_DIR = "/etc/ssh"
# Keys started early in the boot (local stage) wait here until the ssh module takes them.
STAGING_DIR = "/run/cloudseed/hostkeys"
KEY_FILE = KEY_DIR + "/ssh_host_{}_key"
KNOWN_TYPES = ("rsa", "dsa", "ecdsa", "ed25519")
DEFAULT_TYPES = ("rsa", "ecdsa", "ed25519")
# Types slow enough (RSA: seconds, and at random up to ~20 s under emulation) that the boot should
# not wait for them when a faster host key is already there for sshd to start with.
SLOW_TYPES = ("rsa", "dsa")
# A slow key left to the background helper is marked here (on disk) until the helper has installed
# it: under emulation RSA runs for seconds after the boot's end, and a reboot meanwhile kills it with
# /run, where it was being made. The next boot's network stage sees the mark and starts it again
# (``resume_interrupted``); a key an administrator removes later has no mark and is left removed.
PENDING_FILE = "/var/lib/cloudseed/data/host-key-{}.pending"


@dataclass
class KeygenResult:
    keytype: str
    path: str
    ok: bool
    skipped: bool = False
    message: str = ""
    started: float = 0.0  # time.monotonic() around the ssh-keygen process
    finished: float = 0.0
    deferred: bool = False  # still being generated; a background helper installs it and reloads sshd


def key_path(keytype: str) -> str:
    return KEY_FILE.format(keytype)


def _keygen(root: TargetRoot, keytype: str) -> KeygenResult:
    started = time.monotonic()
    result = _run_keygen(root, keytype)
    result.started, result.finished = started, time.monotonic()
    return result


def _run_keygen(root: TargetRoot, keytype: str) -> KeygenResult:
    inner = key_path(keytype)
    argv = ["-t", keytype, "-N", "", "-f"]
    env = dict(os.environ, LANG="C")
    in_target = root.which("ssh-keygen")
    try:
        if in_target or root.is_live:
            proc = root.run([in_target or "ssh-keygen", *argv, inner], env=env, check=False)
        else:
            import shutil  # an offline root without ssh-keygen only: not on a boot's path

            host_keygen = shutil.which("ssh-keygen")
            if host_keygen is None:
                return KeygenResult(keytype, inner, False, message="ssh-keygen is not installed")
            proc = run_on_machine([host_keygen, *argv, root.path(inner)], env=env, timeout=600)
    except CommandError as e:
        return KeygenResult(keytype, inner, False, message=str(e))
    if proc.returncode != 0:
        text = (proc.stderr or proc.stdout).strip()
        if text.lower().startswith("unknown key type"):
            return KeygenResult(keytype, inner, False, skipped=True, message=f"unsupported key type {keytype}")
        return KeygenResult(keytype, inner, False, message=text.splitlines()[-1] if text else f"exit {proc.returncode}")
    return KeygenResult(keytype, inner, True, message=proc.stdout)


def early_types(keytypes: list[str]) -> list[str]:
    """The types the local stage starts early: the fast ones, unless only slow ones are wanted.

    A slow key (RSA) is not among them when a fast one is wanted too: the local stage starts it
    separately at niceness 10 (the fast ones at 0: neither keeps the local stage's boost), and
    sshd does not wait for it: when it is still running at the ssh module, ``generate`` with
    ``defer_slow`` leaves it to a helper that installs it and reloads sshd.
    """
    wanted = [t for t in dict.fromkeys(keytypes) if t in KNOWN_TYPES]
    fast = [t for t in wanted if t not in SLOW_TYPES]
    return fast or wanted


def start_early(root: TargetRoot, keytypes: list[str], low_priority: bool = False,
                niceness: int | None = None) -> list[str]:
    """Start generating ``keytypes`` now, in the background, into the staging directory.

    Called by the local stage on a new instance so the keys are ready when the ssh module runs;
    ``generate`` later adopts the finished keys instead of starting over. Returns the types started.
    """
    keygen = root.which("ssh-keygen")
    if keygen is None:
        return []
    step = 10 if low_priority else 0
    if niceness is not None:  # an absolute niceness, whatever the caller's own (the local stage's unit raises it)
        step = niceness - os.getpriority(os.PRIO_PROCESS, 0)
    nice = root.which("nice") if step else None
    prefix = [nice, "-n", str(step)] if nice else []
    root.makedirs(STAGING_DIR, mode=0o700)
    started = []
    for keytype in dict.fromkeys(keytypes):
        if keytype not in KNOWN_TYPES or root.exists(f"{STAGING_DIR}/ssh_host_{keytype}_key"):
            continue
        try:
            proc = root.spawn([*prefix, keygen, "-q", "-t", keytype, "-N", "", "-f",
                               f"{STAGING_DIR}/ssh_host_{keytype}_key"], env=dict(os.environ, LANG="C"))
        except OSError:
            continue
        root.write(f"{STAGING_DIR}/{keytype}.pid", f"{proc.pid}\n", mode=0o600)
        started.append(keytype)
    return started


def _adopt_staged(root: TargetRoot, keytype: str, timeout: float = 120.0) -> KeygenResult | None:
    """Move an early-generated key into place once its ssh-keygen has finished; None if there is none."""
    staged = f"{STAGING_DIR}/ssh_host_{keytype}_key"
    pid_file = f"{STAGING_DIR}/{keytype}.pid"
    if not root.exists(pid_file):
        return None
    started = time.monotonic()
    try:
        pid = int(root.read_text(pid_file).strip())
    except ValueError:
        return None
    while time.monotonic() - started < timeout:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        except PermissionError:
            pass
        if os.path.exists(f"/proc/{pid}/stat"):
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[-1].startswith("Z"):
                    break
        time.sleep(0.05)
    root.remove(pid_file)
    if not (root.isfile(staged) and root.isfile(f"{staged}.pub")):
        return None
    # /run and /etc are different filesystems: copy atomically into place, then drop the staged copy
    root.write(key_path(keytype), root.read_bytes(staged), mode=0o600, owner=0, group=0)
    root.write(f"{key_path(keytype)}.pub", root.read_bytes(f"{staged}.pub"), mode=0o644, owner=0, group=0)
    root.remove(staged)
    root.remove(f"{staged}.pub")
    return KeygenResult(keytype, key_path(keytype), True, message="", started=started, finished=time.monotonic())


# ssh-keygen writes the public half last, in one write: a non-empty .pub means the pair is complete
# (its process may linger as a zombie when its parent never waits for it, so that is not awaited).
# One look a second: each look starts a process, and under emulation looking every 0.2 s took a
# good part of a CPU for as long as RSA took (seconds, while the boot's later stages ran).
_FINISH_LATER = """pid={pid}; staged={staged}; final={final}; group={group}; waited=0
while [ ! -s "$staged.pub" ] && kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 600 ]; do
    sleep 1; waited=$((waited + 1))
done
[ -s "$staged" ] && [ -s "$staged.pub" ] || exit 1
cp "$staged" "$final.tmp" && chmod 600 "$final.tmp" || exit 1
if [ -n "$group" ] && getent group "$group" >/dev/null 2>&1; then
    chgrp "$group" "$final.tmp" && chmod 640 "$final.tmp"
fi
mv -f "$final.tmp" "$final"
cp "$staged.pub" "$final.pub.tmp" && chmod 644 "$final.pub.tmp" && mv -f "$final.pub.tmp" "$final.pub"
rm -f "$staged" "$staged.pub" "{pid_file}" {pending}
rmdir "$(dirname "$staged")" 2>/dev/null
# OpenSSH before 9.8 re-executes itself for every connection, and that process loads the host keys
# again: the new key is served from now on without a reload, and a reload would only drop the
# connections that arrive while sshd re-executes (a login at that moment: "Connection reset").
# From 9.8 (an sshd-session binary) the listener holds the keys: reload, once (on Debian
# sshd.service is an alias of ssh.service: naming both reloads twice).
for session in {sessions}; do
    [ -e "$session" ] || continue
    systemctl reload-or-try-restart ssh.service >/dev/null 2>&1 ||
        systemctl reload-or-try-restart sshd.service >/dev/null 2>&1 || true
    break
done
"""
# where the distributions put OpenSSH 9.8's per-connection binary
SSHD_SESSION_PATHS = ("/usr/lib/openssh/sshd-session", "/usr/libexec/openssh/sshd-session",
                      "/usr/libexec/sshd-session", "/usr/lib/ssh/sshd-session")


def _staged_pid(root: TargetRoot, keytype: str) -> int | None:
    try:
        pid = int(root.read_text(f"{STAGING_DIR}/{keytype}.pid").strip())
    except (OSError, ValueError):
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            running = not f.read().split(") ", 1)[-1].startswith("Z")
    except OSError:
        running = False
    return pid if running else None


def pending_path(keytype: str) -> str:
    return PENDING_FILE.format(keytype)


def finish_later_script(keytype: str, pid: int, group: str | None, staging: str = STAGING_DIR,
                        final: str | None = None, sessions: tuple[str, ...] = SSHD_SESSION_PATHS,
                        pending: str | None = None) -> str:
    """The detached helper's shell script: wait for ``pid``'s key, install it, reload sshd if it must;
    the key's pending mark is removed once both halves are in place."""
    import shlex

    return _FINISH_LATER.format(pid=pid, staged=shlex.quote(f"{staging}/ssh_host_{keytype}_key"),
                                final=shlex.quote(final or key_path(keytype)),
                                pid_file=shlex.quote(f"{staging}/{keytype}.pid"), group=shlex.quote(group or ""),
                                sessions=" ".join(shlex.quote(p) for p in sessions),
                                pending=shlex.quote(pending or pending_path(keytype)))


def _finish_later(root: TargetRoot, keytype: str, pid: int, group: str | None) -> KeygenResult:
    """Let a still-running early key finish on its own: a detached helper installs it (and reloads
    sshd where OpenSSH needs that to serve a new key). Marked pending on disk until it has."""
    _mark_pending(root, keytype, pid)
    script = finish_later_script(keytype, pid, group)
    root.spawn(["/bin/sh", "-c", script])
    return KeygenResult(keytype, key_path(keytype), True, message="", deferred=True)


def _boot_id() -> str:
    """This boot of the running kernel ("" where it cannot be read): which boot made a pending mark."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _marked_this_boot(root: TargetRoot, keytype: str) -> bool:
    """Was the key's pending mark made by this boot (its helper is on it), rather than by an earlier one?"""
    try:
        fields = root.read_text(pending_path(keytype)).split()
    except OSError:
        return False
    boot = _boot_id()
    return len(fields) > 1 and boot != "" and fields[1] == boot


def _mark_pending(root: TargetRoot, keytype: str, pid: int) -> None:
    """The mark (the ssh-keygen's pid and this boot's id), durable: the file is written with its
    fsync, and its directory is synced too, so a power cut in the next seconds (ext4 commits its
    journal every 5 s) cannot lose the rename."""
    root.write(pending_path(keytype), f"{pid} {_boot_id()}\n", mode=0o644)
    try:
        fd = os.open(root.path(os.path.dirname(pending_path(keytype))), os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def resume_interrupted(root: TargetRoot, key_group: str | None = None) -> list[str]:
    """Start again, in the background as at the first boot, each slow key whose helper never
    installed it (its mark is there, the key is not, and nothing is making it): a reboot cut it off.
    Returns the types started; a mark whose key is in place (the helper stopped just before removing
    it) is removed. Two file checks when nothing was cut off."""
    resumed = []
    for keytype in SLOW_TYPES:
        if not root.exists(pending_path(keytype)):
            continue
        if root.isfile(key_path(keytype)) and root.isfile(f"{key_path(keytype)}.pub"):
            root.remove(pending_path(keytype))
            continue
        if _staged_pid(root, keytype) is not None:
            continue  # being made now
        if _marked_this_boot(root, keytype):
            continue  # left to its helper by this boot's ssh module: done, maybe not installed yet
        root.remove(f"{STAGING_DIR}/ssh_host_{keytype}_key")  # what a killed ssh-keygen left (when /run stayed)
        root.remove(f"{STAGING_DIR}/ssh_host_{keytype}_key.pub")
        if start_early(root, [keytype], low_priority=True):
            pid = _staged_pid(root, keytype)
            if pid is not None:
                _finish_later(root, keytype, pid, key_group)
                resumed.append(keytype)
    return resumed


def generate(root: TargetRoot, keytypes: list[str], parallel: bool = True,
             defer_slow: bool = False, key_group: str | None = None) -> list[KeygenResult]:
    """Generate every missing key of ``keytypes`` (adopting early-started ones); existing keys are kept.

    With ``defer_slow`` (at boot), an early-started slow key (RSA) that is still being generated is
    left to finish in the background when a faster key type is ready, so sshd need not wait for it;
    the helper gives it to ``key_group`` (mode 0640) when the distro has such a group (RHEL's ssh_keys).
    """
    root.makedirs(KEY_DIR, mode=0o755)
    wanted = list(dict.fromkeys(keytypes))
    todo = [t for t in wanted if not root.exists(key_path(t))]
    results: list[KeygenResult] = []
    if defer_slow and any(t not in SLOW_TYPES for t in wanted):
        for keytype in [t for t in todo if t in SLOW_TYPES]:
            pid = _staged_pid(root, keytype)
            not_started = pid is None and root.is_live and not root.exists(f"{STAGING_DIR}/ssh_host_{keytype}_key")
            if not_started and start_early(root, [keytype], low_priority=True):  # start it now, in the background
                pid = _staged_pid(root, keytype)
            if pid is not None:
                results.append(_finish_later(root, keytype, pid, key_group))
    deferred = {r.keytype for r in results}
    todo = [t for t in todo if t not in deferred]
    results += [r for r in (_adopt_staged(root, t) for t in todo) if r is not None]
    todo = [t for t in todo if t not in {r.keytype for r in results}]
    for name in root.listdir(STAGING_DIR):  # early keys of types not asked for are not kept
        if not any(name.startswith((f"ssh_host_{t}_key", f"{t}.pid")) for t in deferred):
            root.remove(f"{STAGING_DIR}/{name}")
    if not deferred:
        root.remove_tree(STAGING_DIR)
    if not todo:
        return results
    if not parallel or len(todo) == 1:
        return results + [_keygen(root, t) for t in todo]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(todo)) as pool:
        return results + list(pool.map(lambda t: _keygen(root, t), todo))


def public_host_keys(root: TargetRoot, exclude_types: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    """(short type, key type, base64) of each ``/etc/ssh/ssh_host_*_key.pub``."""
    found = []
    for name in root.listdir(KEY_DIR):
        if not (name.startswith("ssh_host_") and name.endswith("_key.pub")):
            continue
        short = name[len("ssh_host_"):-len("_key.pub")]
        if short in exclude_types:
            continue
        fields = root.read_text(f"{KEY_DIR}/{name}", default="").split()
        if len(fields) >= 2:
            found.append((short, fields[0], fields[1]))
    return found
