"""The ``output`` key: where each stage's stdout and stderr go (cloud-init's ``output:``).

``output: {all|init|config|final: TARGET}``: a stage's own key wins over ``all`` (the local and
network stages are ``init``). TARGET is a string for both streams, a list ``[stdout, stderr]``, or
a mapping ``{output: ..., error: ...}``; ``error: "&1"`` sends stderr where stdout goes. Each
stream target is ``"> FILE"`` (truncate), ``">> FILE"`` (append; also a bare path) or
``"| COMMAND"`` (a shell command on the target, fed on its stdin, as ``| tee -a FILE``).
Files and commands live in the target root; cloud-init's log paths (``/var/log/cloud-init-output.log``),
links to our logs, lead to those. A target that cannot be opened is a warning and the
stream stays where it was; the boot goes on.
"""

from __future__ import annotations

import errno
import logging
import os
import sys

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

    from cloudseed.core.root import TargetRoot

LOG = logging.getLogger("cloudseed.output")

MODES = ("init", "config", "final")
STAGE_MODES = {"local": "init", "network": "init", "config": "config", "final": "final"}


def targets(cfg: dict, mode: str) -> tuple[str | None, str | None]:
    """The normalised (stdout, stderr) targets for ``mode`` ("> F", ">> F", "| CMD" or None).

    ValueError names what is wrong with a malformed ``output`` value.
    """
    section = cfg.get("output")
    if section is None:
        return None, None
    if not isinstance(section, dict):
        raise ValueError(f"output: expected a mapping of all/init/config/final, got {type(section).__name__}")
    chosen = section[mode] if mode in section else section.get("all")
    where = f"output.{mode if mode in section else 'all'}"
    out: Any = None
    err: Any = None
    if chosen is None:
        return None, None
    if isinstance(chosen, str):
        out = err = chosen
    elif isinstance(chosen, list):
        if len(chosen) > 2:
            raise ValueError(f"{where}: a list is [stdout, stderr], got {len(chosen)} items")
        out = chosen[0] if chosen else None
        err = chosen[1] if len(chosen) > 1 else None
    elif isinstance(chosen, dict):
        out, err = chosen.get("output"), chosen.get("error")
    else:
        raise ValueError(f"{where}: expected a string, a list or a mapping, got {type(chosen).__name__}")
    for name, value in (("stdout", out), ("stderr", err)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{where}: the {name} target must be a string, got {type(value).__name__}")
    if err is not None and err.strip() == "&1":
        err = out
    return _normalise(out), _normalise(err)


def _normalise(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    for op in (">>", ">", "|"):
        if text.startswith(op):
            return f"{op} {text[len(op):].strip()}"
    return f">> {text}"  # a bare path appends


class Redirection:
    """This process's stdout/stderr, redirected as the configuration says and put back afterwards."""

    def __init__(self, root: TargetRoot):
        self.root = root
        self.spec: tuple[str | None, str | None] = (None, None)
        self.saved: tuple[int, int] | None = None
        self.procs: list[Any] = []

    def apply(self, cfg: dict, stage: str, problems: list[str]) -> None:
        """Redirect for ``stage`` per ``cfg``; problems (bad value, target not opened) are appended."""
        try:
            spec = targets(cfg, STAGE_MODES.get(stage, stage))
        except ValueError as e:
            problems.append(str(e))
            return
        if spec == self.spec:
            return
        self.restore()
        if spec == (None, None):
            return
        _flush()
        self.saved = (os.dup(1), os.dup(2))
        from cloudseed.agent.state.log import CONSOLE_FD

        CONSOLE_FD[:] = [self.saved[1]]     # console lines (generated passwords) bypass the redirection
        opened: dict[str, int] = {}
        for fd, target in ((1, spec[0]), (2, spec[1])):
            if target is None:
                continue
            try:
                if target not in opened:
                    opened[target] = self._open(target)
                os.dup2(opened[target], fd)
            except (OSError, ValueError) as e:
                problems.append(f"output: cannot send {'stdout' if fd == 1 else 'stderr'} to {target!r}: {e}")
        for new_fd in opened.values():
            os.close(new_fd)
        self.spec = spec
        LOG.info("stage %s: stdout to %s, stderr to %s", stage, spec[0] or "unchanged", spec[1] or "unchanged")

    def _open(self, target: str) -> int:
        op, _, arg = target.partition(" ")
        if not arg:
            raise ValueError("nothing after the operator")
        if op == "|":
            proc = self.root.pipe(["/bin/sh", "-c", "umask 037; exec " + arg if _simple(arg) else
                                   "umask 037; " + arg])
            self.procs.append(proc)
            return os.dup(proc.stdin.fileno())
        if not arg.startswith("/"):
            raise ValueError("the file must be an absolute path")
        arg = _our_log(self.root, arg)
        self.root.makedirs(os.path.dirname(arg) or "/")
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if op == ">>" else os.O_TRUNC)
        try:
            return os.open(self.root.path_nofollow(arg), flags, 0o640)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise ValueError("it is a symbolic link (output goes only to a file, or to cloud-init's "
                                 "log paths, which lead to ours)") from None
            raise OSError(e.errno, e.strerror) from None   # without the path on this machine

    def restore(self, wait: float = 5.0) -> None:
        """Put stdout/stderr back; commands fed by the redirection see the end of their input."""
        if self.saved is None:
            return
        _flush()
        from cloudseed.agent.state.log import CONSOLE_FD

        CONSOLE_FD.clear()
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        os.close(self.saved[0])
        os.close(self.saved[1])
        self.saved = None
        self.spec = (None, None)
        for proc in self.procs:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=wait)
            except Exception:  # a command that does not end with its input is left running
                LOG.warning("output command %s still running after its input ended", proc.args)
        self.procs = []


def _our_log(root: TargetRoot, path: str) -> str:
    """cloud-init's log paths are our compatibility links to our own logs: the log they lead to.

    Any other link is still refused (the file is opened without following its last component), so
    user-data cannot send the agent's output through a link to somewhere else."""
    from cloudseed.agent.state.compat_paths import LINKS

    inner = os.path.normpath(path)
    target = LINKS.get(inner)
    if target is None or not inner.startswith("/var/log/"):
        return path
    try:
        return target if os.readlink(root.path_nofollow(inner)) == target else path
    except OSError:       # not there yet, or a real file an earlier cloud-init left: written as it is
        return path


def _simple(command: str) -> bool:
    """A plain command line (no shell operators), which the shell can replace itself with."""
    return not any(ch in command for ch in ";&|<>()$`\n")


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
