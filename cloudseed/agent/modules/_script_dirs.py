"""Shared body of the script modules: run script directories, honouring exit codes 1001-1003.

``scripts_user``, ``scripts_vendor`` and ``scripts_per_boot/per_instance/per_once`` all run their
scripts through ``run_dirs`` (the exit codes are read in ``cloudseed.agent.modules._script_exits``).
"""

from __future__ import annotations

from cloudseed.agent.modules import ModuleContext, ModuleError
from cloudseed.agent.state import PER_INSTANCE, SCRIPT_DIRS

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Sequence


def run_dirs(ctx: ModuleContext, directories: Sequence[str], frequency: str = PER_INSTANCE,
             prefix: Sequence[str] = ()) -> None:
    """Run the executables of ``directories`` in name order; ModuleError lists the failures."""
    from cloudseed.agent.modules._script_exits import run_script_dirs

    problems = [f"{len(failures)} of {ran} scripts failed: {', '.join(failures)}"
                for ran, failures in run_script_dirs(ctx, directories, frequency, prefix) if failures]
    if problems:
        raise ModuleError("; ".join(problems))


def run_frequency_dirs(ctx: ModuleContext, frequency: str) -> None:
    run_dirs(ctx, SCRIPT_DIRS[frequency], frequency)
