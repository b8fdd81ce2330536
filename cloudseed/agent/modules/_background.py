"""Work a module leaves running beside the modules after it, and where the boot waits for it.

A module of the network stage (sshd waits for that stage on a first boot) may start a command and
return at once, saying which modules may run while it goes on (``beside``). It is joined
(waited for, its outcome recorded):

- before a module that may not run beside it (``run_module``, once that module is known to run);
- before the stage ends when a module asks for a reboot now;
- at the end of the network stage when no later stage runs in this process (a unit's own stage);
- otherwise at the start of the config stage, whose errors then name a failure
  (``stages._modules_stage``): the network stage's verdict, and so sshd, does not wait for it.

Used by ``resizefs`` (the online grow of the root filesystem: 0.2 s of a first boot's network
stage in the lab guest under emulation, on sshd's path). Nothing here imports beyond the standard
library; the process is this agent's child, so its exit status and last words are known.
"""

from __future__ import annotations

import logging

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    import subprocess
    from typing import Callable

    from cloudseed.agent.modules import ModuleContext

LOG = logging.getLogger("cloudseed.modules")


class Job:
    """One command a module started: who started it, what it does, what may run beside it."""

    def __init__(self, module: str, what: str, process: subprocess.Popen, beside: Callable[[str, dict], bool]):
        self.module = module
        self.what = what
        self.process = process
        self.beside = beside
        self.joined = False
        self.reported = False
        self.problem: str | None = None

    def join(self) -> None:
        """Wait for the command; its failure (exit status, last line on standard error) becomes ``problem``."""
        if self.joined:
            return
        output = self.process.communicate()[1] or b""
        self.joined = True
        code = self.process.returncode
        if code == 0:
            LOG.info("%s: %s finished (beside the modules after it)", self.module, self.what)
            return
        lines = output.decode("utf-8", errors="replace").strip().splitlines()
        self.problem = f"{self.what} exited {code}" + (f": {lines[-1]}" if lines else "")
        LOG.error("%s: %s", self.module, self.problem)


def start(ctx: ModuleContext, argv: list[str], what: str, beside: Callable[[str, dict], bool]) -> Job:
    """Start ``argv`` on the target for the running module and keep it in ``ctx.background``."""
    job = Job(ctx.module_name, what, ctx.root.start(argv), beside)
    ctx.background.append(job)
    return job


def join_before(jobs: list[Job] | None, module: str | None = None, cfg: dict | None = None) -> None:
    """Wait for the jobs that must end before ``module`` runs with ``cfg`` (all of them without a module)."""
    for job in jobs or ():
        if not job.joined and (module is None or not job.beside(module, cfg or {})):
            job.join()


def problems(jobs: list[Job] | None) -> list[str]:
    """The failures of joined jobs not told yet (each told once), as a stage's errors."""
    found = []
    for job in jobs or ():
        if job.joined and not job.reported:
            job.reported = True
            if job.problem:
                found.append(f"{job.module}: {job.problem} (finished beside the modules after it)")
    return found
