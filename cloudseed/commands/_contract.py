"""The contract of a CLI verb (``cloudseed/commands/<verb>.py``), for tests and tools.

Never imported at run time (it imports typing). The file name is the verb; ``VerbPlugin`` is
what the file declares: a one-line ``HELP``, ``configure(parser)`` adding its arguments and
``run(args) -> int`` (the exit status).
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import Optional, Protocol


class VerbPlugin(Protocol):
    """What a verb file declares."""

    HELP: str

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> Optional[int]: ...


# what tests/architecture/protocol_check.py checks first: (the part of the file, its Protocol)
PROTOCOLS = ((None, VerbPlugin),)


def problems(plugin: ModuleType, stem: str) -> list[str]:
    """Every way the verb file ``stem``.py breaks its contract."""
    found: list[str] = []
    if not plugin.HELP.strip() or "\n" in plugin.HELP.strip():
        found.append(f"HELP {plugin.HELP!r} is not one line")
    parser = argparse.ArgumentParser(prog=f"cloudseed {stem}")
    try:
        plugin.configure(parser)
    except Exception as e:  # a verb whose arguments cannot even be declared
        found.append(f"configure(parser) raised {type(e).__name__}: {e}")
    return found
