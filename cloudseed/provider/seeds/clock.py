"""A frozen clock for the filesystem libraries, so that images do not carry the build time.

pycdlib and pyfatfs stamp every record with the current time (and the local time zone). While
``frozen_clock(epoch)`` is held, they see ``epoch`` in UTC instead: the same files give the same
image bytes. The epoch defaults to ``SOURCE_DATE_EPOCH`` when set, else 2000-01-01T00:00:00Z.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Iterator

DEFAULT_EPOCH = 946684800  # 2000-01-01T00:00:00Z
_lock = threading.Lock()


def default_epoch() -> int:
    value = os.environ.get("SOURCE_DATE_EPOCH", "")
    return int(value) if value.isdigit() else DEFAULT_EPOCH


class _FrozenTime:
    """Stands in for the ``time`` module inside a library: a fixed now, UTC only."""

    def __init__(self, epoch: float):
        self._epoch = epoch

    def time(self) -> float:
        return self._epoch

    def localtime(self, seconds: float | None = None) -> time.struct_time:
        return time.gmtime(self._epoch if seconds is None else seconds)

    def __getattr__(self, name: str):
        return getattr(time, name)


@contextlib.contextmanager
def frozen_clock(epoch: int | None = None) -> Iterator[int]:
    """Hold the libraries' clocks at ``epoch`` (seconds since 1970, UTC)."""
    import datetime

    import pycdlib.dates
    import pycdlib.headervd
    import pycdlib.inplaceeditor
    import pycdlib.pycdlib
    import pycdlib.udf
    import pyfatfs.PyFat
    from pyfatfs.DosDateTime import DosDateTime

    epoch = default_epoch() if epoch is None else epoch
    frozen = _FrozenTime(epoch)
    modules = (pycdlib.dates, pycdlib.headervd, pycdlib.inplaceeditor, pycdlib.pycdlib, pycdlib.udf, pyfatfs.PyFat)
    fixed = datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)

    def dos_now(*_args, **_kwargs) -> DosDateTime:
        return DosDateTime(*fixed.timetuple()[:6])

    with _lock:
        saved_now = DosDateTime.__dict__["now"]
        saved = [(module, module.time) for module in modules]
        try:
            for module in modules:
                module.time = frozen
            DosDateTime.now = staticmethod(dos_now)
            yield epoch
        finally:
            for module, original in saved:
                module.time = original
            DosDateTime.now = saved_now
