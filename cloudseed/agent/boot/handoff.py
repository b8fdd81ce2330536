"""One agent process for the whole boot, with the stage units as its ordering points.

``cloudseed boot --hand-off`` is the main process of ``cloudseed-local.service`` (``Type=notify``):
it runs the local stage, tells systemd it is ready (units ordered after the local stage may
start), then waits. Each later stage's unit runs ``cloudseed-stage STAGE`` (POSIX shell, no
Python): it drops ``/run/cloudseed/gate/STAGE.go`` (holding its own PID) when systemd's ordering
lets the stage run, writes a line to the FIFO ``/run/cloudseed/gate/wake`` (this process waits on it
rather than polling), and exits with the code this process writes to ``STAGE.done``; this process
then wakes it with ``SIGUSR1`` (it looks again only once a second otherwise, to notice this
process gone). So the interpreter starts once
per boot while the stages keep their places (local before networking, network before
``network-online.target`` and sshd, final after ``multi-user.target``). When this process is
gone without a verdict, the unit runs the stage itself (``cloudseed init`` etc.).
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from cloudseed.core.root import TargetRoot

GATE_DIR = "/run/cloudseed/gate"
LATER_STAGES = ("network", "config", "final")
POLL_SECONDS = 0.02  # without the FIFO (it could not be made): how often STAGE.go is looked for
# with it: how often STAGE.go is looked for all the same (a writer that does not wake this process)
LOOK_SECONDS = 0.25


class AtOnce:
    """The gate of stages run with no unit to wait for: ``cloudseed boot`` (images without systemd,
    tests, an offline root), and a unit running its own stage. Every stage may start as soon as the
    one before it is done; no unit hears of it. Not ``paced``: there is no idle time to preload in
    and no unit's ``Nice=`` to step out of, so ``stages.run_stages`` applies no performance choice."""

    paced = False

    def ready(self, status: str) -> None:
        """Nothing waits for the local stage's end."""

    def wait_for(self, stage: str) -> None:
        """Never waits."""

    def asked(self, stage: str) -> bool:
        return True

    def done(self, stage: str, code: int) -> None:
        """No unit waits for a verdict."""


class Gate:
    """The files through which the stage units and this process meet. ``paced``: each later stage
    starts when its unit asks, so the process idles between stages (``stages.run_stages`` preloads
    then) and runs each at its unit's priority."""

    paced = True

    def __init__(self, root: TargetRoot, directory: str = GATE_DIR):
        self.root = root
        self.directory = directory
        self.wake_fd: int | None = None

    def open(self) -> None:
        """A fresh gate for this boot, owned by this process: the FIFO first, so that a helper that
        finds the PID finds the FIFO too."""
        self.root.remove_tree(self.directory)
        self.root.makedirs(self.directory, mode=0o755)
        self._listen()
        self.root.write(f"{self.directory}/pid", f"{os.getpid()}\n")

    def _listen(self) -> None:
        """The FIFO ``wake``: a helper writes a line to it after dropping ``STAGE.go``, which ends
        ``wait_for``'s wait at once (a 20 ms poll before: 10 ms late on average, and 50 wake-ups a
        second while the boot went on). Opened read-write, so it never reads as closed (no writer
        between helpers) and a helper's open never blocks. Without it, ``wait_for`` polls."""
        path = self.root.path_nofollow(f"{self.directory}/wake")
        try:
            os.mkfifo(path, 0o600)
            self.wake_fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            self.wake_fd = None

    def ready(self, status: str) -> None:
        """The local stage is done: systemd may start what is ordered after it (``READY=1``)."""
        notify_ready(status)

    def wait_for(self, stage: str) -> None:
        """Return when ``stage``'s unit has asked for it (systemd's ordering allows it now)."""
        go = self.root.path(f"{self.directory}/{stage}.go")
        while not os.path.exists(go):
            if self.wake_fd is None:
                time.sleep(POLL_SECONDS)
                continue
            import select  # already loaded (subprocess imports it)

            select.select([self.wake_fd], [], [], LOOK_SECONDS)
            try:
                os.read(self.wake_fd, 4096)  # the helpers' lines: only their arrival counts
            except BlockingIOError:
                pass

    def asked(self, stage: str) -> bool:
        """Has ``stage``'s unit asked for it already?"""
        return os.path.exists(self.root.path(f"{self.directory}/{stage}.go"))

    def done(self, stage: str, code: int) -> None:
        """The stage's verdict for its unit; on a full disk an empty file (no data block), read as 1."""
        inner = f"{self.directory}/{stage}.done"
        try:
            self.root.write(inner, f"{code}\n")
        except OSError:
            try:
                os.close(os.open(self.root.path_nofollow(inner), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            except OSError:
                pass  # the unit sees this process end without a verdict and runs the stage itself
        self._wake(stage)

    def _wake(self, stage: str) -> None:
        """Signal the stage unit's helper waiting for the verdict (its PID is in ``STAGE.go``), after
        making sure that PID is still that helper (``SIGUSR1`` would end any other process)."""
        from cloudseed.core.root import RootError  # loaded long before (the boot's root)

        try:
            pid = int(self.root.read_text(f"{self.directory}/{stage}.go", default="").strip() or 0)
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                words = handle.read().split(b"\0")
        except (OSError, ValueError, RootError):
            return  # an older helper, or none: it finds the verdict at its next look
        if pid > 1 and stage.encode() in words and any(w.endswith(b"/cloudseed-stage") for w in words):
            import signal  # already loaded (subprocess imports it)

            try:
                os.kill(pid, signal.SIGUSR1)
            except OSError:
                pass


def notify_ready(status: str = "") -> bool:
    """``READY=1`` to systemd when started by a ``Type=notify`` unit; False when there is none."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    # the C module: socket.py (with selectors) took a few tenths of a second to import under TCG,
    # just before READY=1; the network stage imports it later, while networking comes up
    import _socket

    if address.startswith("@"):
        address = "\0" + address[1:]
    message = "READY=1" + (f"\nSTATUS={status}" if status else "")
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    except OSError:
        return False
    try:
        sock.connect(address)
        sock.sendall(message.encode())
    except OSError:
        return False
    finally:
        sock.close()
    return True
