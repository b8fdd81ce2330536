"""The agent's own state files read with their shape checked; a damaged one is set aside, never crashed on.

A state file that is truncated, holds garbage or the wrong type of value, or is a directory (or
a file where a state directory belongs) is renamed beside itself (``NAME.damaged-N``, kept for
diagnosis), a warning naming it goes into the running stage's status, and the boot goes on from
what is still trustworthy: the caller gets None and does what it does when the file is missing.

Only the agent (its stages) sets files aside; the read-only verbs (``status``, ``query``) use
``state.read_json`` and report what they find.
"""

from __future__ import annotations

import json
import logging
import os
import stat

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Callable

    from cloudseed.core.root import TargetRoot

LOG = logging.getLogger("cloudseed.state")

# warnings for the status of the stage that is running (taken by BootState.end / the crash record)
PENDING: list[str] = []

MAX_ID_LENGTH = 4096


def take_warnings() -> list[str]:
    """The warnings about damaged state since the last call (each once)."""
    taken = list(PENDING)
    PENDING.clear()
    return taken


def set_aside(root: TargetRoot, inner: str, problem: str) -> str:
    """Rename damaged ``inner`` to ``inner.damaged-N``; the warning (logged, and kept for the status)."""
    host = root.path_nofollow(inner)
    kept = ""
    for n in range(1, 100):
        candidate = f"{host}.damaged-{n}"
        if not os.path.lexists(candidate):
            try:
                os.rename(host, candidate)
                kept = f"{inner}.damaged-{n}"
            except OSError as e:
                kept = ""
                problem += f"; it could not be set aside ({e.strerror})"
                _remove(host)
            break
    message = (f"state file {inner} is damaged ({problem}): "
               + (f"set aside as {kept}; " if kept else "") + "carrying on without it")
    LOG.warning("%s", message)
    if message not in PENDING:
        PENDING.append(message)
    return message


def _remove(host: str) -> None:
    import shutil

    try:
        if os.path.isdir(host) and not os.path.islink(host):
            shutil.rmtree(host)
        else:
            os.unlink(host)
    except OSError:
        pass


def _regular_file_bytes(root: TargetRoot, inner: str) -> tuple[bytes | None, str | None]:
    """(content, None), (None, None) when missing, or (None, problem) when it is not a readable file."""
    host = root.path(inner)
    try:
        info = os.stat(host)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"cannot be read: {e.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return None, "it is a directory, not a file" if stat.S_ISDIR(info.st_mode) else "it is not a regular file"
    try:
        with open(host, "rb") as f:
            return f.read(), None
    except OSError as e:
        return None, f"cannot be read: {e.strerror}"


def object_problem(data: Any) -> str | None:
    """The shape check of a state file that holds one JSON object."""
    return None if isinstance(data, dict) else f"a JSON {type(data).__name__} where an object belongs"


def load_json(root: TargetRoot, inner: str, problem_of: Callable[[Any], str | None] | None = None) -> Any:
    """The JSON value in ``inner`` when it has the shape ``problem_of`` accepts; else None (set aside)."""
    raw, problem = _regular_file_bytes(root, inner)
    if raw is None and problem is None:
        return None
    if problem is None:
        if not raw.strip():
            problem = "it is empty"
        else:
            try:
                data = json.loads(raw)
            except ValueError as e:
                problem = f"not valid JSON: {e}"
            else:
                problem = problem_of(data) if problem_of else None
                if problem is None:
                    return data
    set_aside(root, inner, problem)
    return None


def load_line(root: TargetRoot, inner: str) -> str | None:
    """The one-line value in ``inner`` (an instance id), or None when missing or set aside."""
    raw, problem = _regular_file_bytes(root, inner)
    if raw is None and problem is None:
        return None
    if problem is None:
        problem = line_problem(raw)
        if problem is None:
            return raw.decode("utf-8").strip()
    set_aside(root, inner, problem)
    return None


def line_problem(raw: bytes) -> str | None:
    """Why ``raw`` is not one line of printable text (an instance id file), or None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    value = text.strip()
    if not value:
        return "it is empty"
    if "\n" in value:
        return "more than one line"
    if len(value) > MAX_ID_LENGTH:
        return f"longer than {MAX_ID_LENGTH} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "it holds control characters"
    return None


def ensure_dir(root: TargetRoot, inner: str, mode: int = 0o755) -> None:
    """``inner`` as a directory: a file (or a link to one) where it belongs is set aside first.

    A link to a directory is followed, as ever (state kept on another disk); a dangling one too
    (its target is made)."""
    if os.path.isdir(root.path(inner)):
        return  # the common case, at the cost it always had
    host = root.path_nofollow(inner)
    try:
        info = os.lstat(host)
    except OSError:
        info = None
    if info is not None and not stat.S_ISDIR(info.st_mode):
        if not stat.S_ISLNK(info.st_mode):
            set_aside(root, inner, "a file where a directory belongs")
        elif os.path.lexists(root.path(inner)) and not os.path.isdir(root.path(inner)):
            set_aside(root, inner, "a link to a file where a directory belongs")
    root.makedirs(inner, mode=mode)


def clear_for_file(root: TargetRoot, inner: str) -> bool:
    """Set aside a directory standing where the state file ``inner`` is to be written; True if it did."""
    host = root.path_nofollow(inner)
    if os.path.isdir(host) and not os.path.islink(host):
        set_aside(root, inner, "it is a directory, not a file")
        return True
    return False
