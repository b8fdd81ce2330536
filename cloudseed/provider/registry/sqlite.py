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

from cloudseed.provider.registry.sql import RegistryError, SQLRegistry

POLL_INTERVAL = 0.2  # seconds between change polls


class SQLiteRegistry(SQLRegistry):
    """Instance records in the SQLite database at ``path``."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.url = f"sqlite:///{os.path.abspath(path)}" if path != ":memory:" else "sqlite://:memory:"
        if path != ":memory:":
            _create_private(path)
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA busy_timeout=30000")
            if path != ":memory:":
                _make_private(path + "-wal", path + "-shm")  # left 0644 by an older version
            self._open_schema()
        except sqlite3.DatabaseError as error:  # not a database, corrupt, locked for too long
            self._conn.close()
            raise RegistryError(f"registry {path}: {error}", "db") from None

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


def _create_private(path: str) -> None:
    """Create the database file 0600 (its directory 0700) before SQLite opens it.

    SQLite gives the ``-wal`` and ``-shm`` files it creates later the database file's mode, so
    a file that is private from its first byte keeps the token key, user-data and passwords
    (all of which pass through the WAL) private whatever the umask."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        os.makedirs(parent, mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    _make_private(path)


def _make_private(*paths: str) -> None:
    for name in paths:
        try:
            if os.stat(name).st_mode & 0o077:
                os.chmod(name, 0o600)
        except FileNotFoundError:
            continue
