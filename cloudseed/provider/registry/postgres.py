"""The registry backend for many servers: PostgreSQL (psycopg 3), with LISTEN/NOTIFY.

Every write sends ``NOTIFY cloudseed_changes`` in its transaction; ``wait_for_change`` listens on
a second connection, so every ``cloudseed serve`` sharing the database drops stale cache entries
as soon as the writer commits (the ``changes`` table is still read, so a missed notification
only delays invalidation until the next poll).

The change log is read as "everything after the last sequence number seen", which is only
right if entries become visible in sequence order. Sequence numbers are handed out when a
row is inserted, not when its transaction commits, so two concurrent writers could commit
11 before 10, and a server that had read 11 would skip 10 forever. Every write that logs a
change therefore takes a transaction-scoped advisory lock first (before any row lock, so it
cannot deadlock with another writer): the next writer's sequence number is drawn only after
the previous one has committed (and is visible: a transaction's locks are released after it
becomes visible), so sequence order is commit order. Registry writes are operator actions
(admin API, ``cloudseed instances``, a guest's password), so serialising them costs nothing
that matters; reads never take the lock.
psycopg is the one optional dependency (``pip install 'cloudseed[postgres]'``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from cloudseed.provider.registry.sql import RegistryError, SQLRegistry

CHANNEL = "cloudseed_changes"
SCHEMA_LOCK_KEY = 0x636C6F7564  # advisory lock serialising schema creation across servers
CHANGES_LOCK_KEY = 0x636C6F7565  # advisory lock making change-log order commit order
INSTALL_HINT = "PostgreSQL registries need the psycopg driver: pip install 'cloudseed[postgres]'"


class PostgresRegistry(SQLRegistry):
    """Instance records in the PostgreSQL database at ``url`` (``postgresql://...``)."""

    placeholder = "%s"
    blob_type = "BYTEA"
    serial_type = "BIGSERIAL PRIMARY KEY"

    def __init__(self, url: str):
        super().__init__()
        try:
            import psycopg
        except ImportError:
            raise RegistryError(INSTALL_HINT, "db") from None
        self.url = url
        self._psycopg = psycopg
        try:
            self._conn = psycopg.connect(url, autocommit=True)
        except psycopg.Error as error:
            detail = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
            raise RegistryError(f"cannot connect to {_redacted(url)}: {detail}", "db") from None
        self._listener: Optional[Any] = None
        self._open_schema()

    def _table_exists(self, cur: Any, name: str) -> bool:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))
        return bool(cur.fetchone()[0])

    def _lock_schema(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))

    def _serialise_changes(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (CHANGES_LOCK_KEY,))

    def _where(self) -> str:
        return _redacted(self.url)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            yield cur

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        with self._lock, self._conn.cursor() as cur:
            yield cur

    def _notify(self, cur: Any) -> None:
        cur.execute(f"NOTIFY {CHANNEL}")

    def changes_since(self, seq: int) -> tuple[int, list[str]]:
        self._listen()  # listen before reading, so no change falls between the two
        return super().changes_since(seq)

    def wait_for_change(self, timeout: float) -> None:
        for _ in self._listen().notifies(timeout=timeout, stop_after=1):
            pass

    def _listen(self) -> Any:
        if self._listener is None:
            self._listener = self._psycopg.connect(self.url, autocommit=True)
            self._listener.execute(f"LISTEN {CHANNEL}")
        return self._listener

    def close(self) -> None:
        with self._lock:
            if self._listener is not None:
                self._listener.close()
            self._conn.close()


def _redacted(url: str) -> str:
    """The URL without its password, for error messages."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        credentials, host = rest.rsplit("@", 1)
        return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"
    return url
