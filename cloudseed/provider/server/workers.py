"""Several server processes on the same metadata ports (``processes: N`` in the settings).

The first process binds every listener with SO_REUSEPORT (so a port 0 becomes a real port),
then starts N-1 workers: children that read a copy of the settings (pickled, on stdin) naming
those ports and no admin listener, and bind the same ports; the kernel spreads connections
over the processes (a child runs ``service.worker_main``). Each process has its own instance
cache (all follow the registry's change log, so an admin change reaches every one within a
second) and its own metrics: the admin listener, and so ``/metrics``, belongs to the first
process and counts only its own requests.
A worker that exits is started again (at most once per ``worker_restart_interval`` seconds,
default 5); on shutdown every worker gets SIGTERM and is waited for.
"""

from __future__ import annotations

import logging
import pickle
import signal
import subprocess
import sys
import time
from typing import Callable, Optional

from cloudseed.provider.server.config import ServerConfig

LOG = logging.getLogger("cloudseed.server")
_CHILD = "from cloudseed.provider.server.service import worker_main; raise SystemExit(worker_main())"


class Workers:
    def __init__(self, config: ServerConfig, count: int, restart_interval: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self.config = config
        self.restart_interval = restart_interval
        self.clock = clock
        self.procs: list[Optional[subprocess.Popen]] = [None] * count
        self.started = [0.0] * count
        self.stopping = False

    def start(self) -> None:
        for index in range(len(self.procs)):
            self._spawn(index)

    def _spawn(self, index: int) -> None:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, close_fds=True)
        assert proc.stdin is not None
        proc.stdin.write(pickle.dumps(self.config))
        proc.stdin.close()
        self.procs[index] = proc
        self.started[index] = self.clock()

    def check(self) -> None:
        """Restart workers that exited (called every half second)."""
        if self.stopping:
            return
        for index, proc in enumerate(self.procs):
            if proc is not None and proc.poll() is not None:
                if self.clock() - self.started[index] < self.restart_interval:
                    continue
                LOG.error("server process %d (pid %d) exited with status %s; starting it again",
                          index + 1, proc.pid, proc.returncode)
                self._spawn(index)

    def stop(self, timeout: float) -> None:
        self.stopping = True
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            if proc is None:
                continue
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                LOG.error("server process pid %d did not stop in time; killing it", proc.pid)
                proc.kill()
                proc.wait()
