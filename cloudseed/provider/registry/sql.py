"""The instance registry over SQL, shared by the SQLite and PostgreSQL backends.

Queries are written once with ``?`` placeholders; a backend supplies the connection, the
transaction and the dialect (placeholder style, column types). Every write appends the changed
instance id to a ``changes`` table, so servers can invalidate their caches by reading
``changes_since(seq)``; PostgreSQL also wakes them at once with NOTIFY.
"""

from __future__ import annotations

import abc
import contextlib
import json
import threading
import time
from typing import Any, Callable, Iterable, Optional

from cloudseed.provider.registry.errors import RegistryError
from cloudseed.provider.registry.events import EventStore
from cloudseed.provider.registry.provisioning import ProvisioningStore
from cloudseed.provider.registry.record import InstanceRecord, utc_now

_COLUMNS = ("instance_id", "name", "hostname", "availability_zone", "project_id")
_BODY_FIELDS = ("addresses", "macs", "ssh_keys", "vendor_data", "vendor_data2", "network_data", "meta",
                "tags", "imds_tokens", "launch_index", "instance_type", "ami_id", "ec2",
                "clouds", "gateway", "nameservers")
LIST_FILTERS = ("name", "hostname", "project_id", "availability_zone", "network", "address", "tag",
                "imds_tokens")
MAX_PHONE_HOME_KEPT = 20
CHANGES_KEPT_SECONDS = 3600.0
# settings rows that belong to one instance, named PREFIX + instance id (or PREFIX + id + "/..."):
# removed with the instance (events.py's retired weight; the OCI instance principal keys)
INSTANCE_SETTINGS = ("events_retired/", "oci_leaf_key/")
# The schema's version, kept in the ``schema_version`` table. 1: the first release (no table);
# 2: the table itself, tags with values (``tags.value``, a mapping in the record body);
# 3: the ``events`` table (registry/events.py) and ``instances.password_by`` (who set the password);
# 4: the ``provisioning_reports`` and ``provisioning_state`` tables (registry/provisioning.py).
SCHEMA_VERSION = 4


class RegistryUnavailable(RegistryError):
    """The database cannot be reached now (stopped, cut off, restarting): try again shortly.

    The server answers 503 with ``Retry-After: retry_after`` (connection.py). A write that
    failed this way may have been applied if the connection broke during its commit; every
    write the server makes on a guest's behalf is safe to repeat."""

    retry_after = 1

    def __init__(self, message: str):
        super().__init__(message, "db", 503)


class SQLRegistry(EventStore, ProvisioningStore, abc.ABC):
    """Instance records in SQL. Thread-safe: one connection guarded by a lock."""

    placeholder = "?"
    blob_type = "BLOB"
    serial_type = "INTEGER PRIMARY KEY AUTOINCREMENT"
    url = ""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._last_prune = 0.0

    # -- backend hooks ---------------------------------------------------------------------
    @abc.abstractmethod
    def _transaction(self) -> contextlib.AbstractContextManager[Any]:
        """Context manager giving a cursor inside one transaction."""

    @abc.abstractmethod
    def _cursor(self) -> contextlib.AbstractContextManager[Any]:
        """Context manager giving a cursor for reads (autocommit)."""

    def _notify(self, cur: Any) -> None:  # noqa: B027 - optional hook
        """Tell other servers something changed (PostgreSQL: NOTIFY); default: nothing."""

    @abc.abstractmethod
    def wait_for_change(self, timeout: float) -> None:
        """Block up to ``timeout`` seconds, returning early when a change may have happened."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection(s)."""

    def _table_exists(self, cur: Any, name: str) -> bool:
        """Whether table ``name`` exists (dialect-specific)."""
        cur.execute(self._sql("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"), (name,))
        return cur.fetchone() is not None

    def _lock_schema(self, cur: Any) -> None:  # noqa: B027 - optional hook
        """Serialise schema creation and upgrades across servers (SQLite: BEGIN IMMEDIATE does)."""

    def _serialise_changes(self, cur: Any) -> None:  # noqa: B027 - optional hook
        """Make change-log entries commit in sequence order (SQLite: writers are serialised).

        Called first in every write that logs a change, before it takes any row lock, so two
        writers never wait for each other's row and lock at once."""

    def _where(self) -> str:
        """The database, for messages (no password)."""
        return self.url

    def _open_schema(self) -> None:
        """Create the schema, or check its version and upgrade it (never a silent misread).

        A database written by a newer cloudseed (a version this code does not know) is refused
        with a message naming the database and both versions."""
        with self._transaction() as cur:
            self._lock_schema(cur)
            if self._table_exists(cur, "schema_version"):
                cur.execute("SELECT MAX(version) FROM schema_version")
                row = cur.fetchone()
                if not row or row[0] is None:
                    raise RegistryError(f"registry {self._where()}: its schema_version table is empty, so "
                                        "its schema version is unknown; refusing to guess", "db")
                version = int(row[0])
            elif self._table_exists(cur, "instances"):
                version = 1  # the first release kept no version
            else:
                version = 0
            if version > SCHEMA_VERSION:
                raise RegistryError(f"registry {self._where()} has schema version {version}, newer than this "
                                    f"cloudseed understands (up to {SCHEMA_VERSION}): upgrade cloudseed",
                                    "db")
            if version == SCHEMA_VERSION:
                return
            for statement in self._schema():
                cur.execute(statement)
            if version == 1:
                self._upgrade_1_to_2(cur)
            if 1 <= version <= 2:
                self._upgrade_2_to_3(cur)
            cur.execute(self._sql("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)"),
                        (SCHEMA_VERSION, utc_now()))

    def schema_version(self) -> int:
        """The schema version of the open database (``SCHEMA_VERSION`` once opened)."""
        with self._cursor() as cur:
            cur.execute("SELECT MAX(version) FROM schema_version")
            return int(cur.fetchone()[0])

    def _upgrade_1_to_2(self, cur: Any) -> None:
        """Tags gain values: the tags table a ``value`` column, the record body a mapping."""
        cur.execute("ALTER TABLE tags ADD COLUMN value TEXT NOT NULL DEFAULT ''")
        cur.execute("SELECT instance_id, body FROM instances")
        for instance_id, body in cur.fetchall():
            fields = json.loads(body)
            if isinstance(fields.get("tags"), list):
                fields["tags"] = {str(tag): "" for tag in fields["tags"]}
                cur.execute(self._sql("UPDATE instances SET body = ? WHERE instance_id = ?"),
                            (json.dumps(fields, sort_keys=True), instance_id))

    def _upgrade_2_to_3(self, cur: Any) -> None:
        """Passwords learn who set them: an existing one on a CloudStack or Exoscale record was the
        operator's (the password server served it), any other the guest's (the OpenStack password
        API). The events table itself is created with the schema (CREATE ... IF NOT EXISTS)."""
        cur.execute("ALTER TABLE instances ADD COLUMN password_by TEXT NOT NULL DEFAULT ''")
        cur.execute("SELECT instance_id, body FROM instances WHERE password IS NOT NULL")
        for instance_id, body in cur.fetchall():
            clouds = json.loads(body).get("clouds") or {}
            who = "operator" if "cloudstack" in clouds or "exoscale" in clouds else "guest"
            cur.execute(self._sql("UPDATE instances SET password_by = ? WHERE instance_id = ?"), (who, instance_id))

    def _sql(self, query: str) -> str:
        return query if self.placeholder == "?" else query.replace("?", self.placeholder)

    def _schema(self) -> list[str]:
        return [
            f"""CREATE TABLE IF NOT EXISTS instances (
                instance_id TEXT PRIMARY KEY, name TEXT NOT NULL, hostname TEXT NOT NULL,
                availability_zone TEXT NOT NULL, project_id TEXT NOT NULL, body TEXT NOT NULL,
                user_data {self.blob_type}, password TEXT, created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL, password_by TEXT NOT NULL DEFAULT '')""",
            """CREATE TABLE IF NOT EXISTS addresses (
                network TEXT NOT NULL, address TEXT NOT NULL, instance_id TEXT NOT NULL,
                PRIMARY KEY (network, address))""",
            "CREATE INDEX IF NOT EXISTS addresses_by_address ON addresses (address)",
            "CREATE INDEX IF NOT EXISTS addresses_by_instance ON addresses (instance_id)",
            """CREATE TABLE IF NOT EXISTS tags (instance_id TEXT NOT NULL, tag TEXT NOT NULL,
                value TEXT NOT NULL DEFAULT '', PRIMARY KEY (instance_id, tag))""",
            "CREATE INDEX IF NOT EXISTS tags_by_tag ON tags (tag)",
            "CREATE INDEX IF NOT EXISTS instances_by_hostname ON instances (hostname)",
            "CREATE INDEX IF NOT EXISTS instances_by_project ON instances (project_id)",
            f"""CREATE TABLE IF NOT EXISTS changes (seq {self.serial_type}, instance_id TEXT NOT NULL,
                changed_at DOUBLE PRECISION NOT NULL)""",
            f"""CREATE TABLE IF NOT EXISTS phone_home (id {self.serial_type}, instance_id TEXT NOT NULL,
                received_at TEXT NOT NULL, source TEXT NOT NULL, fields TEXT NOT NULL)""",
            "CREATE INDEX IF NOT EXISTS phone_home_by_instance ON phone_home (instance_id)",
            "CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied_at TEXT NOT NULL)",
            *self._events_schema(),
            *self._provisioning_schema(),
        ]

    # -- reads -----------------------------------------------------------------------------
    def get(self, instance_id: str) -> Optional[InstanceRecord]:
        """The record of ``instance_id``, or None."""
        with self._cursor() as cur:
            cur.execute(self._sql(f"SELECT {self._select_list()} FROM instances WHERE instance_id = ?"),
                        (instance_id,))
            row = cur.fetchone()
        return self._record(row) if row else None

    def list(self, *, limit: Optional[int] = None, offset: int = 0, **filters: Any) -> list[InstanceRecord]:
        """Records matching every filter (name, hostname, project_id, availability_zone,
        network, address, tag, imds_tokens), ordered by instance id."""
        where, params = [], []
        for key, value in filters.items():
            if value is None:
                continue
            if key not in LIST_FILTERS:
                raise RegistryError(f"unknown filter {key!r} (known: {', '.join(LIST_FILTERS)})", key)
            if key in ("name", "hostname", "project_id", "availability_zone"):
                where.append(f"{key} = ?")
            elif key == "imds_tokens":
                where.append("body LIKE ?")
                value = f'%"imds_tokens": "{value}"%'
            elif key == "tag" and "=" in str(value):  # KEY=VALUE (or a key holding "=")
                where.append("instance_id IN (SELECT instance_id FROM tags WHERE tag = ? OR (tag = ? AND value = ?))")
                tag_key, _, tag_value = str(value).partition("=")
                params.extend((str(value), tag_key))
                value = tag_value
            elif key == "tag":
                where.append("instance_id IN (SELECT instance_id FROM tags WHERE tag = ?)")
            else:
                where.append(f"instance_id IN (SELECT instance_id FROM addresses WHERE {key} = ?)")
            params.append(str(value))
        query = f"SELECT {self._select_list()} FROM instances"
        if where:
            query += " WHERE " + " AND ".join(where)
        query += " ORDER BY instance_id"
        if limit is not None:
            query += f" LIMIT {int(limit)} OFFSET {int(offset)}"
        elif offset:
            no_limit = " LIMIT -1" if self.placeholder == "?" else ""
            query += f"{no_limit} OFFSET {int(offset)}"
        with self._cursor() as cur:
            cur.execute(self._sql(query), params)
            rows = cur.fetchall()
        return [self._record(row) for row in rows]

    def count(self) -> int:
        with self._cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM instances")
            return int(cur.fetchone()[0])

    def find_by_address(self, address: str, network: Optional[str] = None) -> list[str]:
        """Ids of instances holding ``address`` (on ``network`` when given)."""
        with self._cursor() as cur:
            if network is None:
                cur.execute(self._sql("SELECT instance_id FROM addresses WHERE address = ?"), (address,))
            else:
                cur.execute(self._sql("SELECT instance_id FROM addresses WHERE network = ? AND address = ?"),
                            (network, address))
            return [row[0] for row in cur.fetchall()]

    def find_by_addresses(self, addresses: list[str], network: Optional[str] = None) -> dict[str, list[str]]:
        """``find_by_address`` for many addresses in one statement: address -> ids (an address that
        nobody holds is left out). A storm of new instances is read this way, a batch at a time."""
        found: dict[str, list[str]] = {}
        if not addresses:
            return found
        marks = ", ".join("?" * len(addresses))
        with self._cursor() as cur:
            if network is None:
                cur.execute(self._sql(f"SELECT address, instance_id FROM addresses WHERE address IN ({marks})"),
                            list(addresses))
            else:
                cur.execute(self._sql(f"SELECT address, instance_id FROM addresses WHERE network = ? AND address IN "
                                      f"({marks})"), [network, *addresses])
            rows = cur.fetchall()
        for address, instance_id in rows:
            found.setdefault(address, []).append(instance_id)
        return found

    def get_many(self, instance_ids: list[str]) -> dict[str, InstanceRecord]:
        """``get`` for many instances in one statement: id -> record (unknown ids left out)."""
        if not instance_ids:
            return {}
        marks = ", ".join("?" * len(instance_ids))
        with self._cursor() as cur:
            cur.execute(self._sql(f"SELECT {self._select_list()} FROM instances WHERE instance_id IN ({marks})"),
                        list(instance_ids))
            rows = cur.fetchall()
        return {record.instance_id: record for record in map(self._record, rows)}

    def changes_since(self, seq: int) -> tuple[int, list[str]]:
        """(latest sequence number, ids changed after ``seq``); seq -1 means "just the latest"."""
        with self._cursor() as cur:
            if seq < 0:
                cur.execute("SELECT COALESCE(MAX(seq), 0) FROM changes")
                return int(cur.fetchone()[0]), []
            cur.execute(self._sql("SELECT seq, instance_id FROM changes WHERE seq > ? ORDER BY seq"), (seq,))
            rows = cur.fetchall()
        if not rows:
            return seq, []
        return int(rows[-1][0]), sorted({row[1] for row in rows})

    def phone_home(self, instance_id: str) -> list[dict]:
        """The phone_home posts received for ``instance_id``, oldest first."""
        with self._cursor() as cur:
            cur.execute(self._sql("SELECT received_at, source, fields FROM phone_home WHERE instance_id = ? "
                                  "ORDER BY id"), (instance_id,))
            return [{"received_at": r[0], "source": r[1], "fields": json.loads(r[2])} for r in cur.fetchall()]

    # -- writes ----------------------------------------------------------------------------
    def add(self, record: InstanceRecord) -> InstanceRecord:
        """Store a new instance; RegistryError if the id exists or an address is taken."""
        self.add_many([record])
        return record

    def add_many(self, records: Iterable[InstanceRecord]) -> int:
        """Store several new instances in one transaction (all or none)."""
        count = 0
        with self._lock, self._transaction() as cur:
            self._serialise_changes(cur)  # first: before any row lock (no deadlock)
            for record in records:
                record.validate()
                cur.execute(self._sql("SELECT 1 FROM instances WHERE instance_id = ?"), (record.instance_id,))
                if cur.fetchone():
                    raise RegistryError(f"instance {record.instance_id} already exists", "instance_id", 409)
                self._check_addresses_free(cur, record)
                now = utc_now()
                cur.execute(self._sql(
                    "INSERT INTO instances (instance_id, name, hostname, availability_zone, project_id, "
                    "body, user_data, password, created_at, updated_at, password_by) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
                    (*self._columns(record), self._body(record), record.user_data, record.password,
                     record.created_at, now, record.password_by))
                self._write_children(cur, record)
                self._log_change(cur, record.instance_id)
                count += 1
            self._notify(cur)
        return count

    def update(self, instance_id: str, /, **changes: Any) -> InstanceRecord:
        """Change fields of an existing instance (validated like ``from_dict``); the new record."""
        with self._lock, self._transaction() as cur:
            self._serialise_changes(cur)  # first: before any row lock (no deadlock)
            cur.execute(self._sql(f"SELECT {self._select_list()} FROM instances WHERE instance_id = ?"),
                        (instance_id,))
            row = cur.fetchone()
            if not row:
                raise RegistryError(f"no instance {instance_id}", "instance_id", 404)
            record = InstanceRecord.from_dict(changes, partial_of=self._record(row))
            self._check_addresses_free(cur, record)
            cur.execute(self._sql(
                "UPDATE instances SET name = ?, hostname = ?, availability_zone = ?, project_id = ?, "
                "body = ?, user_data = ?, password = ?, updated_at = ?, password_by = ? WHERE instance_id = ?"),
                (*self._columns(record)[1:], self._body(record), record.user_data, record.password,
                 utc_now(), record.password_by, instance_id))
            cur.execute(self._sql("DELETE FROM addresses WHERE instance_id = ?"), (instance_id,))
            cur.execute(self._sql("DELETE FROM tags WHERE instance_id = ?"), (instance_id,))
            self._write_children(cur, record)
            self._log_change(cur, instance_id)
            self._notify(cur)
        return record

    def delete(self, instance_id: str) -> bool:
        """Remove an instance and everything stored with it; False if it did not exist."""
        with self._lock, self._transaction() as cur:
            self._serialise_changes(cur)  # first: before any row lock (no deadlock)
            cur.execute(self._sql("DELETE FROM instances WHERE instance_id = ?"), (instance_id,))
            existed = cur.rowcount > 0
            for table in ("addresses", "tags", "phone_home", "events", "provisioning_reports", "provisioning_state"):
                cur.execute(self._sql(f"DELETE FROM {table} WHERE instance_id = ?"), (instance_id,))
            for prefix in INSTANCE_SETTINGS:  # an instance id holds no "/": PREFIX + id + "/" is its alone
                self._drop_settings(cur, prefix + instance_id, "")
            if existed:
                self._log_change(cur, instance_id)
                self._notify(cur)
        return existed

    def set_password_once(self, instance_id: str, password: str) -> bool:
        """Store the guest's password if none is set; False when one already is."""
        with self._lock, self._transaction() as cur:
            self._serialise_changes(cur)  # first: before any row lock (no deadlock)
            cur.execute(self._sql("UPDATE instances SET password = ?, updated_at = ?, password_by = 'guest' "
                                  "WHERE instance_id = ? AND password IS NULL"),
                        (password, utc_now(), instance_id))
            changed = cur.rowcount > 0
            if changed:
                self._log_change(cur, instance_id)
                self._notify(cur)
        return changed

    def clear_password(self, instance_id: str) -> bool:
        """Forget the password (operator action), so the guest may set a new one."""
        with self._lock, self._transaction() as cur:
            self._serialise_changes(cur)  # first: before any row lock (no deadlock)
            cur.execute(self._sql("UPDATE instances SET password = NULL, updated_at = ?, password_by = '' "
                                  "WHERE instance_id = ?"), (utc_now(), instance_id))
            changed = cur.rowcount > 0
            if changed:
                self._log_change(cur, instance_id)
                self._notify(cur)
        return changed

    def add_phone_home(self, instance_id: str, source: str, fields: dict) -> None:
        """Keep one phone_home post (the last MAX_PHONE_HOME_KEPT per instance)."""
        with self._lock, self._transaction() as cur:
            cur.execute(self._sql("INSERT INTO phone_home (instance_id, received_at, source, fields) "
                                  "VALUES (?, ?, ?, ?)"),
                        (instance_id, utc_now(), source, json.dumps(fields)))
            cur.execute(self._sql(
                "DELETE FROM phone_home WHERE instance_id = ? AND id NOT IN (SELECT id FROM phone_home "
                f"WHERE instance_id = ? ORDER BY id DESC LIMIT {MAX_PHONE_HOME_KEPT})"),
                (instance_id, instance_id))

    def shared_setting(self, name: str, make: Callable[[], str]) -> str:
        """A value every server of this registry shares (created with ``make`` on first use)."""
        with self._cursor() as cur:  # made (maybe costly: a key pair) only when missing
            cur.execute(self._sql("SELECT value FROM settings WHERE name = ?"), (name,))
            row = cur.fetchone()
        if row is not None:
            return str(row[0])
        with self._lock, self._transaction() as cur:
            cur.execute(self._sql("INSERT INTO settings (name, value) VALUES (?, ?) "
                                  "ON CONFLICT (name) DO NOTHING"), (name, make()))
            cur.execute(self._sql("SELECT value FROM settings WHERE name = ?"), (name,))
            return str(cur.fetchone()[0])

    def drop_settings(self, name: str, keep: str = "") -> None:
        """Remove the settings row ``name`` and every ``name/...`` row but ``keep``."""
        with self._lock, self._transaction() as cur:
            self._drop_settings(cur, name, keep)

    def _drop_settings(self, cur: Any, name: str, keep: str) -> None:
        cur.execute(self._sql("DELETE FROM settings WHERE (name = ? OR substr(name, 1, ?) = ?) AND name <> ?"),
                    (name, len(name) + 1, name + "/", keep))

    # -- helpers ---------------------------------------------------------------------------
    def _check_addresses_free(self, cur: Any, record: InstanceRecord) -> None:
        for i, entry in enumerate(record.addresses):
            cur.execute(self._sql("SELECT instance_id FROM addresses WHERE network = ? AND address = ?"),
                        (entry["network"], entry["address"]))
            row = cur.fetchone()
            if row and row[0] != record.instance_id:
                raise RegistryError(f"address {entry['address']} on network {entry['network']} is already "
                                    f"used by instance {row[0]}", f"addresses[{i}].address", 409)

    def _write_children(self, cur: Any, record: InstanceRecord) -> None:
        for entry in record.addresses:
            cur.execute(self._sql("INSERT INTO addresses (network, address, instance_id) VALUES (?, ?, ?)"),
                        (entry["network"], entry["address"], record.instance_id))
        for tag, value in sorted(record.tags.items()):
            cur.execute(self._sql("INSERT INTO tags (instance_id, tag, value) VALUES (?, ?, ?)"),
                        (record.instance_id, tag, value))

    def _log_change(self, cur: Any, instance_id: str) -> None:
        self._serialise_changes(cur)
        now = time.time()
        cur.execute(self._sql("INSERT INTO changes (instance_id, changed_at) VALUES (?, ?)"),
                    (instance_id, now))
        if now - self._last_prune > 60:
            self._last_prune = now
            cur.execute(self._sql("DELETE FROM changes WHERE changed_at < ?"), (now - CHANGES_KEPT_SECONDS,))

    @staticmethod
    def _columns(record: InstanceRecord) -> tuple:
        return tuple(getattr(record, c) for c in _COLUMNS)

    @staticmethod
    def _body(record: InstanceRecord) -> str:
        return json.dumps({k: getattr(record, k) for k in _BODY_FIELDS}, sort_keys=True)

    @staticmethod
    def _select_list() -> str:
        return ", ".join((*_COLUMNS, "body", "user_data", "password", "created_at", "password_by"))

    @staticmethod
    def _record(row: Any) -> InstanceRecord:
        instance_id, name, hostname, zone, project, body, user_data, password, created, password_by = row
        fields = json.loads(body)
        if isinstance(fields.get("tags"), list):  # written by a first-release server after the upgrade
            fields["tags"] = {str(tag): "" for tag in fields["tags"]}
        return InstanceRecord(instance_id=instance_id, name=name, hostname=hostname, availability_zone=zone,
                              project_id=project,
                              user_data=bytes(user_data) if user_data is not None else None,
                              password=password, password_by=password_by or "", created_at=created,
                              **{k: fields[k] for k in _BODY_FIELDS if k in fields})

    def __enter__(self) -> SQLRegistry:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

