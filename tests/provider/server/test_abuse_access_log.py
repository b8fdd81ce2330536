"""The access log a server creates is not world-readable (issue 16 item 4): 0640 under umask 022."""

from __future__ import annotations

import os
import stat
import time

from tests.provider.server.server_support import ServerProcess


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_access_log_is_not_world_readable(tmp_path):
    old = os.umask(0o022)
    try:
        log = tmp_path / "access.log"
        proc = ServerProcess(str(tmp_path / "r.db"), str(tmp_path / "run"), ["127.0.0.1:0"],
                             extra=["--access-log", str(log)])
        try:
            assert proc.get("/latest/meta-data/instance-id", "127.0.0.1").status == 404
            deadline = time.monotonic() + 5
            while not (log.exists() and log.stat().st_size) and time.monotonic() < deadline:
                time.sleep(0.1)  # flushed twice a second
            assert log.stat().st_size > 0
            assert _mode(str(log)) == 0o640
        finally:
            proc.stop()
    finally:
        os.umask(old)
