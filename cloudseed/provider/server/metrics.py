"""Prometheus metrics for the server: requests by API and status, latency histogram, cache."""

from __future__ import annotations

import bisect
from typing import Callable

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.histogram = [0] * (len(BUCKETS) + 1)
        self.latency_sum = 0.0
        self.latency_count = 0
        self.rate_limited = 0
        self.gauges: dict[str, Callable[[], float]] = {}
        self.drains: list[Callable[[], None]] = []  # add counts kept elsewhere (fast_path.py) first

    def observe(self, api: str, status: int, seconds: float) -> None:
        key = (api, status)
        self.requests[key] = self.requests.get(key, 0) + 1
        self.histogram[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.latency_sum += seconds
        self.latency_count += 1

    def render(self) -> str:
        for drain in self.drains:
            drain()
        lines = ["# HELP cloudseed_requests_total Metadata and admin requests answered.",
                 "# TYPE cloudseed_requests_total counter"]
        for (api, status), count in sorted(self.requests.items()):
            lines.append(f'cloudseed_requests_total{{api="{api}",status="{status}"}} {count}')
        lines += ["# HELP cloudseed_request_duration_seconds Time from request parsed to response written.",
                  "# TYPE cloudseed_request_duration_seconds histogram"]
        cumulative = 0
        for bound, count in zip((*BUCKETS, float("inf")), self.histogram):
            cumulative += count
            label = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(f'cloudseed_request_duration_seconds_bucket{{le="{label}"}} {cumulative}')
        lines.append(f"cloudseed_request_duration_seconds_sum {self.latency_sum:.6f}")
        lines.append(f"cloudseed_request_duration_seconds_count {self.latency_count}")
        lines += ["# HELP cloudseed_rate_limited_total Requests refused with 429.",
                  "# TYPE cloudseed_rate_limited_total counter", f"cloudseed_rate_limited_total {self.rate_limited}"]
        for name, read in sorted(self.gauges.items()):
            lines += [f"# TYPE cloudseed_{name} gauge", f"cloudseed_{name} {read()}"]
        return "\n".join(lines) + "\n"
