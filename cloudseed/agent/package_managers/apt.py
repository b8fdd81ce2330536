"""apt-get, the Debian family's package manager.

Commands run non-interactively (``DEBIAN_FRONTEND=noninteractive``) keeping existing config
files (``--force-confold``). ``apt_get_command`` replaces the command and its options,
``apt_get_upgrade_subcommand`` the upgrade verb (default ``dist-upgrade``), ``apt_get_wrapper``
(``{command: eatmydata, enabled: auto}``) puts a wrapper in front: ``auto`` uses it when the
target has it. Before each command the dpkg and apt locks of the target are tested with fcntl;
a held lock is waited for, at most ``package_lock_timeout`` seconds (default 300). A pinned
package is ``name=version``. A reboot is required when ``/var/run/reboot-required`` exists.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time

from cloudseed.agent.package_managers.base import DEFAULT_LOCK_TIMEOUT, PackageError, PackageManager, as_seconds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

APT_GET_COMMAND = ("apt-get", "--option=Dpkg::Options::=--force-confold",
                   "--option=Dpkg::options::=--force-unsafe-io", "--assume-yes", "--quiet")
APT_GET_WRAPPER = {"command": "eatmydata", "enabled": "auto"}
# the frontend lock first, then the order apt takes them; the lists lock is taken by update alone
LOCK_FILES = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock", "/var/cache/apt/archives/lock",
              "/var/lib/apt/lists/lock")
REBOOT_REQUIRED = "/var/run/reboot-required"
_LOCK_POLL = 0.5


class AptManager(PackageManager):
    name = "apt"
    tool = "apt-get"
    transient_markers = ("Temporary failure resolving", "Could not connect to", "Connection failed",
                         "Connection timed out", "Failed to fetch", "Hash Sum mismatch", "Could not resolve",
                         "Unable to connect to", "Some index files failed to download")

    def __init__(self, root, settings: dict[str, Any]):
        super().__init__(root, settings)
        self.lock_timeout = as_seconds(settings.get("package_lock_timeout"), "package_lock_timeout",
                                       DEFAULT_LOCK_TIMEOUT)

    # ------------------------------------------------------------------ the command line
    def command(self, verb: str, packages: Sequence[str] = ()) -> list[str]:
        """The whole argv for ``verb`` (wrapper, apt-get and its options, verb, packages)."""
        return [*self.wrapper(), *self.base_command(), verb, *packages]

    def base_command(self) -> list[str]:
        value = self.settings.get("apt_get_command")
        if value is None:
            return list(APT_GET_COMMAND)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
            raise PackageError("apt_get_command: expected a non-empty list of strings")
        return list(value)

    def wrapper(self) -> list[str]:
        settings = self.settings.get("apt_get_wrapper")
        if settings is None:
            settings = APT_GET_WRAPPER
        if not isinstance(settings, dict):
            raise PackageError("apt_get_wrapper: expected a mapping with command and enabled")
        command = settings.get("command", APT_GET_WRAPPER["command"])
        enabled = settings.get("enabled", APT_GET_WRAPPER["enabled"])
        argv = [command] if isinstance(command, str) else list(command or [])
        if not argv or not all(isinstance(a, str) and a for a in argv):
            if str(enabled).lower() in ("auto", "false", "no", "off", "0") or enabled is False:
                return []
            raise PackageError("apt_get_wrapper.command: expected a command (a string or a list)")
        mode = str(enabled).strip().lower()
        if enabled is True or mode in ("true", "yes", "on", "1"):
            return argv
        if mode == "auto":
            found = self.root.which(argv[0]) if "/" not in argv[0] else (argv[0] if self.root.isfile(argv[0])
                                                                         else None)
            return argv if found else []
        if enabled is False or mode in ("false", "no", "off", "0"):
            return []
        raise PackageError(f"apt_get_wrapper.enabled: expected true, false or auto, got {enabled!r}")

    def upgrade_verb(self) -> str:
        verb = self.settings.get("apt_get_upgrade_subcommand", "dist-upgrade")
        if not isinstance(verb, str) or not verb.strip():
            raise PackageError("apt_get_upgrade_subcommand: expected a subcommand such as dist-upgrade")
        return verb.strip()

    # ------------------------------------------------------------------ the lock
    def lock_held(self) -> bool:
        """True when another process holds one of apt's or dpkg's locks in the target."""
        for inner in LOCK_FILES:
            host = self.root.path(inner)
            try:
                fd = os.open(host, os.O_RDWR | os.O_NOFOLLOW)
            except OSError:  # not there (only existing locks are waited for) or not ours to open
                continue
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EACCES, errno.EAGAIN):
                    return True
                raise
            finally:
                os.close(fd)  # closing drops the lock we may have taken
        return False

    def wait_until_free(self, deadline: float) -> None:
        if not self.lock_held():
            return
        started = time.monotonic()
        from cloudseed.agent.package_managers.base import LOG

        LOG.info("apt: another process holds the dpkg/apt lock; waiting up to %.0fs", max(0.0, deadline - started))
        while self.lock_held():
            if time.monotonic() >= deadline:
                raise PackageError(f"the dpkg lock (/var/lib/dpkg/lock-frontend) is still held by another "
                                   f"process after {self.lock_timeout:g}s (package_lock_timeout)")
            time.sleep(_LOCK_POLL)
        LOG.info("apt: lock free after %.1fs", time.monotonic() - started)

    # ------------------------------------------------------------------ the work
    def _run(self, verb: str, packages: Sequence[str] = (), what: str = "") -> None:
        self.run(self.command(verb, packages), what or verb, env={"DEBIAN_FRONTEND": "noninteractive"},
                 lock_timeout=self.lock_timeout)

    def output_problem(self, what: str, output: str) -> str | None:
        """apt-get update exits 0 when a source could not be fetched: that is a failure here."""
        if what != "update":
            return None
        lines = [line.strip() for line in output.splitlines()]
        failed = [line for line in lines if line.startswith(("W: Failed to fetch", "E: Failed to fetch"))]
        if failed:
            return failed[0][3:].strip()
        return next((line for line in lines if line.startswith("W: Some index files failed")), None)

    def refresh_index(self) -> None:
        self._run("update")

    def upgrade(self) -> None:
        self._run(self.upgrade_verb(), what="upgrade")

    def install(self, packages: Sequence[tuple[str, str | None]]) -> None:
        self._run("install", [f"{name}={version}" if version else name for name, version in packages])

    def reboot_required(self) -> bool:
        return self.root.exists(REBOOT_REQUIRED)


MANAGER = AptManager
