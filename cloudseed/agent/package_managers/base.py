"""What every package manager plugin shares: running its commands on the target, timed and logged.

A command runs through the target root (chrooted when the root is not ``/``) with a bounded
timeout; its output is appended to ``/var/log/cloudseed-output.log`` of the target and the agent
log gets one line with the command and how long it took. A failure whose output looks transient
(a download that failed, a lock taken by someone else) is retried a bounded number of times. A
failure raises ``PackageError`` whose message is the tool and the most telling line of its output
(``apt-get install failed: E: Unable to locate package nosuchpkg``). The package index is
refreshed at most once per agent run for each root and manager unless asked again.
"""

from __future__ import annotations

import logging
import shlex
import time

from cloudseed.core.root import CommandError

TYPE_CHECKING = False  # typing is not imported at boot
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

    from cloudseed.core.root import TargetRoot

LOG = logging.getLogger("cloudseed.packages")
OUTPUT_LOG = "/var/log/cloudseed-output.log"

DEFAULT_RETRIES = 2  # attempts after the first one for a transient failure
DEFAULT_RETRY_DELAY = 3.0
DEFAULT_COMMAND_TIMEOUT = 1800.0  # one package command may run this long
DEFAULT_LOCK_TIMEOUT = 300.0  # waiting for another apt/dpkg to let go of the lock

_UPDATED: set[tuple[str, str]] = set()  # (root, manager) whose index this agent run refreshed


def note_refreshed(root: TargetRoot, manager: str) -> None:
    """Record that ``manager``'s index of ``root`` was refreshed in this run by other means
    (apt_configure's own ``apt-get update``), so a later ``update`` does not repeat it."""
    _UPDATED.add((root.top, manager))


def forget_refreshes() -> None:
    """Make the next ``update`` refresh again (a source was added, or a new agent run begins)."""
    _UPDATED.clear()


class PackageError(Exception):
    """A package command failed; the message says which command and why."""


def as_seconds(value: Any, key: str, default: float) -> float:
    if value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PackageError(f"{key}: expected a number of seconds, got {value!r}") from None
    if number < 0:
        raise PackageError(f"{key}: expected a number of seconds >= 0, got {value!r}")
    return number


def as_count(value: Any, key: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise PackageError(f"{key}: expected a whole number >= 0, got {value!r}")
    return int(value)


class PackageManager:
    """Base of the plugins: ``update``, ``upgrade``, ``install`` and the reboot question."""

    name = "generic"
    tool = "true"  # what the messages call the command
    transient_markers: tuple[str, ...] = ()

    def __init__(self, root: TargetRoot, settings: dict[str, Any]):
        self.root = root
        self.settings = settings
        self.retries = as_count(settings.get("package_retries"), "package_retries", DEFAULT_RETRIES)
        self.retry_delay = as_seconds(settings.get("package_retry_delay"), "package_retry_delay",
                                      DEFAULT_RETRY_DELAY)
        self.command_timeout = as_seconds(settings.get("package_command_timeout"), "package_command_timeout",
                                          DEFAULT_COMMAND_TIMEOUT)
        self.commands_seconds = 0.0  # time spent inside package manager processes (for the benchmark)

    # ------------------------------------------------------------------ what a plugin provides
    def available(self) -> bool:
        return self.root.which(self.tool) is not None

    def refresh_index(self) -> None:
        """Refresh the package index (apt-get update, dnf makecache)."""

    def upgrade(self) -> None:
        raise PackageError(f"{self.name}: upgrading is not supported")

    def install(self, packages: Sequence[tuple[str, str | None]]) -> None:
        raise PackageError(f"{self.name}: installing is not supported")

    def reboot_required(self) -> bool:
        return False

    # ------------------------------------------------------------------ shared behaviour
    def update(self, force: bool = False) -> bool:
        """Refresh the index once per agent run (again only with ``force``); True when it ran."""
        key = (self.root.top, self.name)
        if key in _UPDATED and not force:
            LOG.debug("%s: package index already refreshed in this run", self.name)
            return False
        self.refresh_index()
        _UPDATED.add(key)
        return True

    def wait_until_free(self, deadline: float) -> None:
        """Block until nothing else holds the package manager's lock, or until ``deadline``."""

    def lock_held(self) -> bool:
        return False

    def run(self, argv: Sequence[str], what: str, env: Mapping[str, str] | None = None,
            lock_timeout: float | None = None) -> None:
        """Run one package command: wait for the lock, retry transient failures, log output and time."""
        import os

        run_env = dict(os.environ)
        run_env.update(env or {})
        attempts = self.retries + 1
        lock_deadline = time.monotonic() + (lock_timeout if lock_timeout is not None else 0.0)
        attempt = 0
        while True:
            attempt += 1
            try:
                self.wait_until_free(lock_deadline)
            except PackageError as e:
                raise PackageError(f"{self.tool} {what} failed: {e}") from None
            started = time.monotonic()
            try:
                proc = self.root.run(argv, env=run_env, check=False, timeout=self.command_timeout or None)
                returncode, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
            except CommandError as e:  # not found, not executable, timed out
                returncode, stdout, stderr = e.returncode, e.stdout, e.stderr
            elapsed = time.monotonic() - started
            self.commands_seconds += elapsed
            record_output(self.root, shlex.join(argv), stdout, stderr)
            problem = self.output_problem(what, stdout + stderr) if returncode == 0 else None
            if returncode == 0 and problem is None:
                LOG.info("%s: %s done in %.1fs", self.name, what, elapsed)
                return
            reason = problem or failure_reason(stdout, stderr, returncode)
            if returncode in (126, 127):
                raise PackageError(f"{self.tool} {what} failed: {reason}")
            if self.lock_held() and time.monotonic() < lock_deadline:
                LOG.info("%s: %s failed while another process holds the lock; waiting", self.name, what)
                continue  # someone took the lock between our check and the command: wait again
            # a timed-out index refresh is worth another try; a timed-out install or upgrade may
            # have left dpkg half-way, where running it again does not help
            timed_out_refresh = returncode == 124 and what in ("update", "makecache")
            transient = timed_out_refresh or (returncode != 124 and self.is_transient(stdout + stderr))
            if transient and attempt < attempts:
                LOG.warning("%s: %s failed (%s); retrying (%d of %d)", self.name, what, reason, attempt,
                            attempts - 1)
                time.sleep(self.retry_delay)
                continue
            raise PackageError(f"{self.tool} {what} failed: {reason}")

    def output_problem(self, what: str, output: str) -> str | None:
        """A failure a command reported in its output while exiting 0 (None: none)."""
        return None

    def is_transient(self, output: str) -> bool:
        return any(marker in output for marker in self.transient_markers)


def failure_reason(stdout: str, stderr: str, returncode: int) -> str:
    """The most telling line of a failed command's output (its first error line, else its last line)."""
    lines = [line.strip() for line in (stderr + "\n" + stdout).splitlines() if line.strip()]
    for prefix in ("E:", "Error:", "error:"):
        for line in lines:
            if line.startswith(prefix):
                return line
    if returncode == 124:
        return lines[-1] if lines else "timed out"
    return lines[-1] if lines else f"exit status {returncode}"


def record_output(root: TargetRoot, title: str, stdout: str, stderr: str) -> None:
    """Append a command's output to the target's output log (never fails the command for it)."""
    text = (stdout or "") + (stderr or "")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    entry = f"--- {stamp} {title}\n{text}" + ("" if not text or text.endswith("\n") else "\n")
    try:
        root.write(OUTPUT_LOG, entry, mode=0o640, append=True, keep_mode=True)
    except OSError as e:
        LOG.warning("cannot write %s: %s", OUTPUT_LOG, e)
