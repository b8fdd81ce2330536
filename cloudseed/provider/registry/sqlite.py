"""The default registry backend: one SQLite file in WAL mode, created on first use.

Several processes on one host may share the file (WAL lets readers run beside the writer);
other servers notice changes by polling the ``changes`` table, which is a cheap indexed read.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from typing import Any, Iterator

from cloudseed.provider.registry.sql import SQLRegistry

POLL_INTERVAL = 0.2  # seconds between change polls


class SQLiteRegistry(SQLRegistry):
    """Instance records in the SQLite database at ``path``."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.url = f"sqlite:///{os.path.abspath(path)}" if path != ":memory:" else "sqlite://:memory:"
        if path != ":memory:":
            parent = os.path.dirname(os.path.abspath(path))
            os.makedirs(parent, exist_ok=True)
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        with self._transaction() as cur:
            for statement in self._schema():
                cur.execute(statement)
        if path != ":memory:":
            os.chmod(path, 0o600)  # user-data and passwords are secrets

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._lock:
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            else:
                cur.execute("COMMIT")
            finally:
                cur.close()

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        with self._lock:
            cur = self._conn.cursor()
            try:
                yield cur
            finally:
                cur.close()

    def wait_for_change(self, timeout: float) -> None:
        time.sleep(min(timeout, POLL_INTERVAL))

    def close(self) -> None:
        with self._lock:
            self._conn.close()
