"""``type: log``: each event as a line in the agent's log (``level``: DEBUG, INFO, WARN, ERROR, FATAL).

The logger is named as cloud-init names it, ``cloudinit.reporting.<event_type>.<name>``, so log
filters written for cloud-init select the same lines.
"""

from __future__ import annotations

import logging

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING, "WARNING": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "CRITICAL": logging.CRITICAL}


class LogHandler:
    def __init__(self, level: int):
        self.level = level

    def publish(self, event: Any) -> None:
        logging.getLogger(f"cloudinit.reporting.{event.event_type}.{event.name}").log(self.level, event.as_string())

    def flush(self, deadline: float) -> None:
        return None


def make(options: dict, context: Any) -> LogHandler:
    from cloudseed.agent.reporting import ReportingError

    unknown = sorted(set(options) - {"level"})
    if unknown:
        raise ReportingError(f"reporting.{context.name}: unknown key {unknown[0]!r} for type log (known: level)")
    level = options.get("level", "DEBUG")
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise ReportingError(f"reporting.{context.name}.level: {level!r} is not one of DEBUG, INFO, WARN, ERROR, "
                             "FATAL")
    return LogHandler(LEVELS[level.upper()])
