"""Logging for the agent: ``/var/log/cloudseed.log`` in the target root, and stderr.

The file gets INFO and up (DEBUG with ``--debug``, TRACE with it twice), is created 0640 and never receives
secrets: modules log what they did, not the values they were given.
"""

from __future__ import annotations

import logging
import os
import sys

from cloudseed.agent.state import LOG_FILE
from cloudseed.core.root import TargetRoot

_FORMAT = "%(asctime)s %(name)s[%(process)d] %(levelname)s: %(message)s"
# cloud-init 24.x's extra levels: TRACE below DEBUG (each HTTP exchange, each seed file read),
# DEPRECATED between WARNING and ERROR
TRACE = logging.DEBUG - 5
DEPRECATED = 35
logging.addLevelName(TRACE, "TRACE")
logging.addLevelName(DEPRECATED, "DEPRECATED")


def setup_logging(root: TargetRoot, debug: bool | int = False, stage: str | None = None) -> None:
    """``debug``: 0 INFO to the file (WARNING to stderr), 1 (``--debug``) DEBUG to both, 2 or more
    (``--debug --debug``) TRACE to both."""
    logger = logging.getLogger("cloudseed")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    level = TRACE if int(debug) >= 2 else logging.DEBUG if debug else logging.INFO
    logger.setLevel(level)
    logger.propagate = False
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(level if debug else logging.WARNING)
    stderr.setFormatter(logging.Formatter("cloudseed: %(levelname)s: %(message)s"))
    logger.addHandler(stderr)
    try:
        root.makedirs(os.path.dirname(LOG_FILE))
        host = root.path_nofollow(LOG_FILE)
        if os.path.islink(host):
            os.unlink(host)  # never append through a link planted in the log directory
        fd = os.open(host, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o640)
        os.fchmod(fd, 0o640)
        stream = os.fdopen(fd, "a", encoding="utf-8")
        file_handler = _LogFile(stream)
        prefix = f"[{stage}] " if stage else ""
        file_handler.setFormatter(logging.Formatter(_FORMAT.replace("%(message)s", prefix + "%(message)s")))
        logger.addHandler(file_handler)
    except OSError as e:
        logger.warning("cannot open %s: %s", LOG_FILE, e)


class _LogFile(logging.StreamHandler):
    """The log file; when it cannot take a line (a full or read-only disk) the console gets one line
    saying so, and the file no more (no traceback per log line)."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        error = sys.exc_info()[1]
        self.setLevel(logging.CRITICAL + 1)
        reason = getattr(error, "strerror", None) or error
        console(f"cloudseed: {LOG_FILE} cannot be written ({reason}); logging to the console only")


# the stderr this process started with while ``output:`` sends fd 2 to a file or a command
# (cloudseed.agent.state.output sets it): console lines go there, never into that file
CONSOLE_FD: list[int] = []


def console(message: str, secret: bool = False) -> None:
    """A line for the console (stderr goes to the console from the systemd units).

    A ``secret`` line (a generated password) goes to the stderr the process started with even
    while ``output:`` sends stderr to a file: it must never land in an output log (cloud-init's
    CVE-2021-3429)."""
    text = message.rstrip("\n") + "\n"
    try:
        if secret and CONSOLE_FD:
            os.write(CONSOLE_FD[0], text.encode("utf-8", "replace"))
            return
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
