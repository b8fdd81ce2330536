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
When the database goes away (stopped, restarted, cut off by the network) every call raises
``RegistryUnavailable`` (the server answers 503 and keeps serving what it has cached) and the
next call after ``RECONNECT_INTERVAL`` tries a new connection, so nothing waits on a dead
socket for long: libpq's timeouts (``CONNECTION_DEFAULTS``, unless the URL sets its own) notice
a silent network within seconds instead of TCP's minutes.

psycopg is the one optional dependency (``pip install 'cloudseed[postgres]'``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Iterator, Optional

from cloudseed.provider.registry.sql import RegistryError, RegistryUnavailable, SQLRegistry

CHANNEL = "cloudseed_changes"
SCHEMA_LOCK_KEY = 0x636C6F7564  # advisory lock serialising schema creation across servers
CHANGES_LOCK_KEY = 0x636C6F7565  # advisory lock making change-log order commit order
INSTALL_HINT = "PostgreSQL registries need the psycopg driver: pip install 'cloudseed[postgres]'"
# libpq connection settings (the URL's own win): a connection attempt gives up after 3 s, and an
# established one that stops answering (a cut network) is declared dead after about 3 s
CONNECTION_DEFAULTS = {"connect_timeout": "3", "keepalives": "1", "keepalives_idle": "3",
                       "keepalives_interval": "1", "keepalives_count": "2", "tcp_user_timeout": "3000"}
RECONNECT_INTERVAL = 1.0  # seconds between connection attempts while the database is away
LOG = logging.getLogger("cloudseed.registry")


class PostgresRegistry(SQLRegistry):
    """Instance records in the PostgreSQL database at ``url`` (``postgresql://...``)."""

    placeholder = "%s"
    blob_type = "BYTEA"
    serial_type = "BIGSERIAL PRIMARY KEY"
    for_update = " FOR UPDATE"  # provisioning_state rows: two servers never advance one state at once

    def __init__(self, url: str):
        super().__init__()
        try:
            import psycopg
        except ImportError:
            raise RegistryError(INSTALL_HINT, "db") from None
        self.url = url
        self._psycopg = psycopg
        self._conninfo = _with_defaults(psycopg, url)
        try:
            self._conn: Optional[Any] = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as error:
            raise RegistryError(f"cannot connect to {_redacted(url)}: {_detail(error)}", "db") from None
        self._listener: Optional[Any] = None
        self._last_attempt = 0.0  # of a reconnection
        self._unavailable = ""  # why the database is away ("" while it is not)
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
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction(), conn.cursor() as cur:
                    yield cur
            except (self._psycopg.OperationalError, self._psycopg.InterfaceError) as error:
                raise self._lost(conn, error) from None

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        with self._lock:
            conn = self._connection()
            try:
                with conn.cursor() as cur:
                    yield cur
            except (self._psycopg.OperationalError, self._psycopg.InterfaceError) as error:
                raise self._lost(conn, error) from None

    def _connection(self) -> Any:
        """The open connection, or a new one (at most one attempt per RECONNECT_INTERVAL)."""
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        now = time.monotonic()
        if now - self._last_attempt < RECONNECT_INTERVAL:
            raise RegistryUnavailable(self._unavailable)
        self._last_attempt = now
        try:
            self._conn = self._psycopg.connect(self._conninfo, autocommit=True)
        except self._psycopg.Error as error:
            self._unavailable = f"registry {_redacted(self.url)} is unavailable: {_detail(error)}; retry shortly"
            raise RegistryUnavailable(self._unavailable) from None
        LOG.warning("registry %s is reachable again", _redacted(self.url))
        self._unavailable = ""
        return self._conn

    def _lost(self, conn: Any, error: Exception) -> RegistryUnavailable:
        """What to raise for ``error``; the connection is dropped when it is broken."""
        if conn.broken or conn.closed:
            if not self._unavailable:
                LOG.warning("registry %s connection lost: %s", _redacted(self.url), _detail(error))
            self._unavailable = f"registry {_redacted(self.url)} is unavailable: {_detail(error)}; retry shortly"
            with contextlib.suppress(Exception):
                conn.close()
            self._conn = None
            return RegistryUnavailable(self._unavailable)
        return RegistryUnavailable(f"registry {_redacted(self.url)}: {_detail(error)}; retry shortly")

    def _notify(self, cur: Any) -> None:
        cur.execute(f"NOTIFY {CHANNEL}")

    def changes_since(self, seq: int) -> tuple[int, list[str]]:
        self._listen()  # listen before reading, so no change falls between the two
        return super().changes_since(seq)

    def wait_for_change(self, timeout: float) -> None:
        if self._listener is None:  # listening starts now: a change may have come before, read at once
            self._listen()
            return
        listener = self._listen()
        try:
            for _ in listener.notifies(timeout=timeout, stop_after=1):
                pass
        except self._psycopg.Error as error:
            self._listener = None
            with contextlib.suppress(Exception):
                listener.close()
            raise RegistryUnavailable(f"registry {_redacted(self.url)}: listening for changes failed: "
                                      f"{_detail(error)}") from None

    def _listen(self) -> Any:
        if self._listener is None:
            try:
                listener = self._psycopg.connect(self._conninfo, autocommit=True)
                listener.execute(f"LISTEN {CHANNEL}")
            except self._psycopg.Error as error:
                raise RegistryUnavailable(f"registry {_redacted(self.url)} is unavailable: {_detail(error)}") \
                    from None
            self._listener = listener
        return self._listener

    def close(self) -> None:
        with self._lock:
            for conn in (self._listener, self._conn):
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()


def _with_defaults(psycopg: Any, url: str) -> str:
    """``url`` as a libpq connection string, with CONNECTION_DEFAULTS for what it does not set."""
    try:
        given = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error as error:
        raise RegistryError(f"invalid PostgreSQL URL {_redacted(url)}: {_detail(error)}", "db") from None
    extra = {key: value for key, value in CONNECTION_DEFAULTS.items() if key not in given}
    return psycopg.conninfo.make_conninfo(url, **extra)


def _detail(error: Exception) -> str:
    return "; ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__


def _redacted(url: str) -> str:
    """The URL without its password, for error messages."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        credentials, host = rest.rsplit("@", 1)
        return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"
    return url
