"""Time-dependent server behaviour with injected clocks: token expiry and worker restart pacing.

No sleeping: the IMDSv2 token issuer and the worker supervisor take the clock they read, and
the tests move it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from cloudseed.provider.server.config import ServerConfig
from cloudseed.provider.server.imds_tokens import TokenError, TokenIssuer
from cloudseed.provider.server.workers import Workers


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_an_imdsv2_token_expires_after_its_ttl():
    clock = Clock(1_700_000_000.0)
    tokens = TokenIssuer(b"k" * 32, clock=clock)
    token = tokens.issue("i-1", 1)
    clock.now += 0.9
    tokens.check(token, "i-1")  # valid, and now remembered
    clock.now += 1.2
    with pytest.raises(TokenError, match="expired") as remembered:
        tokens.check(token, "i-1")
    assert remembered.value.status == 401
    fresh = TokenIssuer(b"k" * 32, clock=clock)  # another server: checks the MAC, then the expiry
    with pytest.raises(TokenError, match="expired"):
        fresh.check(token, "i-1")
    long_lived = tokens.issue("i-1", 21600)
    clock.now += 21599
    tokens.check(long_lived, "i-1")


class ExitingWorkers(Workers):
    """Workers whose processes exit at once (a real child process, not a server)."""

    def _spawn(self, index: int) -> None:
        self.procs[index] = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
        self.started[index] = self.clock()
        self.spawned = getattr(self, "spawned", 0) + 1


def test_a_worker_that_exits_is_restarted_at_most_once_per_interval():
    clock = Clock(100.0)
    workers = ExitingWorkers(ServerConfig(), 1, restart_interval=5.0, clock=clock)
    workers.start()
    workers.procs[0].wait()
    clock.now += 4.9
    workers.check()
    assert workers.spawned == 1
    clock.now += 0.2
    workers.check()
    assert workers.spawned == 2
    workers.procs[0].wait()
    workers.check()
    assert workers.spawned == 2
    workers.stop(1.0)
