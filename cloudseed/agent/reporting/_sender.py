"""A background thread that POSTs queued events, so the boot never waits for a slow endpoint.

``Sender(post, batch)`` starts a daemon thread; ``put(item)`` queues (at most ``MAX_QUEUED``:
past that the oldest are dropped and counted); the thread takes up to ``batch`` items at a time
and calls ``post(items)``, which raises on failure. After ``GIVE_UP_AFTER`` failures in a row
the endpoint is taken as unreachable: what is queued is dropped and every later item too (said
once in the log), so an absent endpoint costs the boot nothing more. ``flush(deadline)`` waits
until the queue is empty or the monotonic ``deadline`` passes, whichever comes first.
"""

from __future__ import annotations

import logging
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

LOG = logging.getLogger("cloudseed.reporting")
MAX_QUEUED = 2000
GIVE_UP_AFTER = 3


class Sender:
    def __init__(self, name: str, post: Callable[[list], None], batch: int = 1):
        self.name = name
        self.post = post
        self.batch = max(1, batch)
        self.items: list[Any] = []
        self.busy = False
        self.failures = 0
        self.gave_up = False
        self.dropped = 0
        self.sent = 0
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"report-{name}", daemon=True)
        self._thread.start()

    def put(self, item: Any) -> None:
        with self._cond:
            if self.gave_up:
                self.dropped += 1
                return
            self.items.append(item)
            if len(self.items) > MAX_QUEUED:
                del self.items[0]
                self.dropped += 1
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self.items:
                    self._cond.wait()
                taken, self.items = self.items[:self.batch], self.items[self.batch:]
                self.busy = True
            try:
                self.post(taken)
                self.failures = 0
                self.sent += len(taken)
            except Exception as e:  # noqa: BLE001 - an endpoint's failure is logged, never raised
                self.failures += 1
                LOG.warning("reporting %s: sending %d event(s) failed: %s", self.name, len(taken), e)
                if self.failures >= GIVE_UP_AFTER:
                    with self._cond:
                        self.gave_up = True
                        self.dropped += len(self.items) + len(taken)
                        self.items = []
                    LOG.warning("reporting %s: %d failures in a row; no more events are sent", self.name,
                                self.failures)
            finally:
                with self._cond:
                    self.busy = False
                    self._cond.notify_all()

    def flush(self, deadline: float) -> bool:
        """True when everything queued was handled before ``deadline``."""
        with self._cond:
            while self.items or self.busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    LOG.warning("reporting %s: %d event(s) not sent in time", self.name, len(self.items))
                    return False
                self._cond.wait(left)
        return True
