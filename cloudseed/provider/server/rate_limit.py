"""Rate limiting: a token bucket per identified instance (its address on a network, or the id a
trusted proxy signed), answered with a clear 429."""

from __future__ import annotations

import math
import time
from typing import Hashable, Optional


class RateLimiter:
    """``rate`` requests per second sustained, bursts up to ``burst``; rate 0 disables."""

    def __init__(self, rate: float, burst: int):
        self.rate = rate
        self.burst = max(burst, 1)
        self.buckets: dict[Hashable, list[float]] = {}
        self._last_prune = time.monotonic()

    def retry_after(self, source: Hashable) -> Optional[int]:
        """None when ``source`` may go ahead (one token taken), else seconds to wait."""
        if self.rate <= 0:
            return None
        now = time.monotonic()
        bucket = self.buckets.get(source)
        if bucket is None:
            if now - self._last_prune > 60:
                self._prune(now)
            self.buckets[source] = [self.burst - 1.0, now]
            return None
        tokens = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        if tokens >= 1.0:
            bucket[0] = tokens - 1.0
            return None
        bucket[0] = tokens
        return max(1, math.ceil((1.0 - tokens) / self.rate))

    def _prune(self, now: float) -> None:
        full_after = self.burst / self.rate
        self.buckets = {k: v for k, v in self.buckets.items() if now - v[1] < full_after}
        self._last_prune = now
