"""One agent at a time per root: the lock every stage and every verb that changes the system holds.

``/var/lib/cloudseed/lock`` (on the root's own disk, so two containers sharing a root share it
even with separate ``/run``s) is locked with one ``flock`` call. A second agent waits for it,
at most ``CLOUDSEED_LOCK_WAIT`` seconds (default 300), saying once whom it waits for, then gives
up with a message naming the holder (``LockBusy``) and changes nothing. The holder writes who it
is into the file (pid, what it runs, since when) and puts the same text in its environment, so a
``cloudseed`` started by its own scripts (``cloud-init single`` in a runcmd) goes ahead inside
the holder's lock instead of waiting for its own parent. The kernel drops the lock when the
holder exits, however it ends (``kill -9`` included): nothing stale is ever left to clean up.

Where the lock cannot be taken at all (a read-only root, a file system without locks) the agent
goes on without it, saying so in the log: nothing else can change that root either.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time

from cloudseed.agent.state import DATA_DIR
from cloudseed.core.root import RootError

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Callable

    from cloudseed.core.root import TargetRoot

LOG = logging.getLogger("cloudseed.lock")

LOCK_FILE = f"{DATA_DIR}/lock"
ENV_HELD = "CLOUDSEED_LOCK_HELD"
ENV_WAIT = "CLOUDSEED_LOCK_WAIT"
DEFAULT_WAIT = 300.0
POLL_SECONDS = 0.05


class LockBusy(Exception):
    """Another agent held the lock for longer than this one would wait; the message names it."""


class AgentLock:
    """The lock of one root, held from ``acquire`` until ``release`` (or the process's end)."""

    def __init__(self, root: TargetRoot, what: str):
        self.root = root
        self.what = what
        self.fd: int | None = None
        self.token = ""
        self.inherited = False  # held by the cloudseed that started this process

    def __enter__(self) -> AgentLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self, wait: float | None = None) -> None:
        """Take the lock, waiting at most ``wait`` seconds (default: ``CLOUDSEED_LOCK_WAIT`` or 300)."""
        fd = self._open()
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            if _started_by_holder(holder):
                os.close(fd)
                self.inherited = True
                LOG.info("%s runs inside the lock of the cloudseed that started it (%s)", self.what, holder)
                return
            self._wait(fd, holder, _wait_seconds(wait))
        except OSError as e:  # no locks on this file system
            os.close(fd)
            LOG.warning("%s: not locked (%s): nothing keeps a second agent out", LOCK_FILE, e.strerror)
            return
        self.fd = fd
        self.token = f"pid {os.getpid()}: {self.what}, since {time.strftime('%H:%M:%S')}"
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, self.token.encode() + b"\n", 0)
        except OSError:
            pass  # a full disk: the lock holds all the same, only its holder goes unnamed
        os.environ[ENV_HELD] = self.token

    def release(self) -> None:
        if self.fd is None:
            return
        if os.environ.get(ENV_HELD) == self.token:
            del os.environ[ENV_HELD]
        os.close(self.fd)  # the lock goes with the last descriptor of the file
        self.fd = None

    def _open(self) -> int | None:
        host = self.root.path_nofollow(LOCK_FILE)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            return os.open(host, flags, 0o644)
        except FileNotFoundError:
            try:
                self.root.makedirs(DATA_DIR, mode=0o755)
                return os.open(host, flags, 0o644)
            except (OSError, RootError) as e:
                LOG.warning("%s cannot be made (%s): the agent runs without its lock", LOCK_FILE, e)
                return None
        except OSError as e:
            return self._open_damaged_or_readonly(e)

    def _open_damaged_or_readonly(self, error: OSError) -> int | None:
        from cloudseed.agent.state.files import set_aside

        host = self.root.path_nofollow(LOCK_FILE)
        if os.path.lexists(host) and (os.path.isdir(host) or os.path.islink(host)):
            set_aside(self.root, LOCK_FILE, "it is not a plain file")
            try:
                return os.open(host, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            except OSError:
                return None
        try:
            return os.open(host, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)  # a read-only root
        except OSError:
            LOG.warning("%s cannot be opened (%s): the agent runs without its lock", LOCK_FILE, error.strerror)
            return None

    def _wait(self, fd: int, holder: str, seconds: float) -> None:
        from cloudseed.agent.state.log import console

        console(f"cloudseed {self.what}: waiting up to {seconds:g}s for the agent that holds "
                f"{LOCK_FILE} ({holder or 'holder unknown'})")
        deadline = time.monotonic() + seconds
        while True:
            time.sleep(POLL_SECONDS)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _read_holder(fd) or holder
                    os.close(fd)
                    raise LockBusy(f"another cloudseed is changing this system ({holder or 'holder unknown'}; "
                                   f"{LOCK_FILE}); waited {seconds:g}s, nothing was done "
                                   f"(set {ENV_WAIT} to wait longer)") from None


def _started_by_holder(holder: str) -> bool:
    """Was this process started (through its scripts) by the agent that holds the lock?

    The holder's text is in this process's environment: it matches the lock file's, or (the file
    could not take it: a full disk) the pid it names is an ancestor of this process.
    """
    inherited = os.environ.get(ENV_HELD, "")
    if not inherited:
        return False
    if holder:
        return holder == inherited
    word = inherited.split(":", 1)[0].split()[-1]
    if not word.isdigit():
        return False
    pid = os.getppid()
    for _ in range(64):
        if pid == int(word):
            return True
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _wait_seconds(wait: float | None) -> float:
    if wait is not None:
        return wait
    try:
        return max(0.0, float(os.environ.get(ENV_WAIT, DEFAULT_WAIT)))
    except ValueError:
        return DEFAULT_WAIT


def run_locked(root: TargetRoot, what: str, body: Callable[[], int]) -> int:
    """``body()`` holding the root's lock; 1 with a message naming the holder when it stays busy."""
    lock = AgentLock(root, what)
    try:
        lock.acquire()
    except LockBusy as e:
        from cloudseed.agent.state.log import console

        console(f"cloudseed {what}: {e}")
        return 1
    try:
        return body()
    finally:
        lock.release()
