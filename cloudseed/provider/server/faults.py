"""Faults to rehearse against: an instance's ``fault`` events (``registry/events.py``) on any API.

While a fault is active (from ``not_before`` to ``not_after``, state ``scheduled``), a request of
that instance whose path starts with ``details.path_prefix`` waits ``details.delay_seconds``
(on the event loop: other requests go on) and then answers ``details.status`` (a 5xx) or, with
status 0, its normal answer late. Checked before everything else on the metadata listeners,
token checks included, so an API can be made to fail whole (``/``) or in part
(``/latest/meta-data/iam/``); ``MetadataApp`` consults ``CachedInstance.faults`` only for an
instance that has any.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Optional

from cloudseed.provider.server.engine.http import Response, text_error


def active(faults: tuple, path: str, now: Optional[float] = None) -> Any:
    """The first fault of ``faults`` that is active now and covers ``path``, else None."""
    now = time.time() if now is None else now
    for fault in faults:
        if fault.phase(now) == "active" and path.startswith(fault.details["path_prefix"]):
            return fault
    return None


def answer(fault: Any, normal: Callable[[], Any]) -> Any:
    """What a request hit by ``fault`` gets: the fault's status, or ``normal()``, after its delay."""
    status = fault.details["status"]
    if not fault.details["delay_seconds"]:
        return _failed(status) if status else normal()
    return _late(fault.details["delay_seconds"], status, normal)


async def _late(delay: float, status: int, normal: Callable[[], Any]) -> Response:
    await asyncio.sleep(delay)
    if status:
        return _failed(status)
    found = normal()
    return found if isinstance(found, Response) else await found


def _failed(status: int) -> Response:
    return text_error(status, f"fault injected by the operator (status {status})", [("Retry-After", "1")])
