"""``type: print``: each event as a line on the agent's standard output (the console at boot)."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class PrintHandler:
    def publish(self, event: Any) -> None:
        try:
            sys.stdout.write(event.as_string() + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass

    def flush(self, deadline: float) -> None:
        return None


def make(options: dict, context: Any) -> PrintHandler:
    from cloudseed.agent.reporting import ReportingError

    if options:
        raise ReportingError(f"reporting.{context.name}: type print takes no settings, got {sorted(options)[0]!r}")
    return PrintHandler()
