"""The registry's schema version: a first-release database upgrades and keeps its instances; a
newer one is refused with a message naming the database and both versions.

``fixtures/registry-v1.sql`` is ``sqlite3 .dump`` of a database written by the first release's
registry code (commit 2cee58b): two instances, tags without values, a password, a phone_home
post and the IMDS token key. For PostgreSQL the same dump is loaded with the few dialect words
changed the way that release's PostgreSQL backend wrote them (BYTEA, BIGSERIAL).
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys

import pytest

from cloudseed.provider.registry import RegistryError, open_registry
from cloudseed.provider.registry.sql import SCHEMA_VERSION

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "registry-v1.sql")
# ``sqlite3 .dump`` of a database written by the version-2 registry (commit dd9f2e7): a CloudStack
# record with the operator's password, an OpenStack record with a password the guest posted
FIXTURE_V2 = os.path.join(os.path.dirname(__file__), "fixtures", "registry-v2.sql")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _load_v1(db_url: str, fixture: str = FIXTURE) -> None:
    with open(fixture) as handle:
        dump = handle.read()
    if not db_url.startswith("postgresql://"):
        conn = sqlite3.connect(db_url)
        conn.executescript(dump)
        conn.close()
        return
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        for statement in dump.split(";\n"):
            statement = statement.strip()
            if not statement or statement.startswith(("PRAGMA", "BEGIN", "COMMIT")) or "sqlite_sequence" in statement:
                continue
            statement = statement.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
            statement = statement.replace(" BLOB,", " BYTEA,")
            statement = re.sub(r"X'([0-9a-f]*)'", r"decode('\1', 'hex')", statement)
            conn.execute(statement)
        for table, column in (("changes", "seq"), ("phone_home", "id")):
            conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                         f"(SELECT MAX({column}) FROM {table}))")


def test_first_release_database_upgrades_and_keeps_its_instances(db_url):
    _load_v1(db_url)
    with open_registry(db_url) as registry:
        web, db = registry.get("i-v1-web"), registry.get("i-v1-db")
        assert web is not None and db is not None
        assert web.hostname == "web1" and web.imds_tokens == "required" and web.meta == {"role": "web"}
        assert web.addresses == [{"address": "10.0.0.5", "network": "net-a", "prefix": 24}]
        assert web.user_data == b"#cloud-config\nhostname: web1\n"
        assert web.tags == {"env=test": "", "web": ""}  # the first release stored names only
        assert db.password == "hunter2-from-v1"
        assert registry.phone_home("i-v1-web")[0]["fields"] == {"instance_id": "i-v1-web"}
        assert registry.shared_setting("imds_token_key", lambda: "new") == "0" * 64  # tokens stay valid
        assert [r.instance_id for r in registry.list(tag="web")] == ["i-v1-web"]
        assert registry.find_by_address("10.0.0.6", "net-a") == ["i-v1-db"]
        seq, _ = registry.changes_since(-1)
        assert seq == 3
        registry.update("i-v1-web", tags={"env": "test"})
        assert registry.changes_since(3)[1] == ["i-v1-web"]
    with open_registry(db_url) as registry:  # reopening an upgraded database changes nothing
        assert registry.get("i-v1-web").tags == {"env": "test"}
        assert [r.instance_id for r in registry.list(tag="env=test")] == ["i-v1-web"]
        assert registry.schema_version() == SCHEMA_VERSION


def test_version_2_database_upgrades_to_events_password_owners_and_provisioning(db_url):
    _load_v1(db_url, FIXTURE_V2)
    with open_registry(db_url) as registry:
        assert registry.schema_version() == SCHEMA_VERSION == 4
        cs, guest = registry.get("i-v2-cs"), registry.get("i-v2-os")
        # the password server served the CloudStack one: the operator's; the other was posted
        assert (cs.password, cs.password_by) == ("operator-cs-pass", "operator")
        assert (guest.password, guest.password_by) == ("guest-encrypted-blob", "guest")
        assert cs.created_at == "2026-01-02T03:04:05Z" and guest.tags == {"env": "prod"}
        assert registry.events("i-v2-cs") == []
        event = registry.add_event("i-v2-cs", "rebalance", 1_900_000_000)
        assert registry.events("i-v2-cs") == [event]
        registry.clear_password("i-v2-os")
        assert registry.set_password_once("i-v2-os", "again") and registry.get("i-v2-os").password_by == "guest"
        assert registry.provisioning("i-v2-os")["state"] == "pending"  # schema 4: provisioning reports


def test_a_newer_schema_is_refused_naming_the_database(db_url):
    open_registry(db_url).close()  # a current database, then a later release's version row
    if db_url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (99, 'later')")
    else:
        conn = sqlite3.connect(db_url)
        conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (99, 'later')")
        conn.commit()
        conn.close()
    with pytest.raises(RegistryError) as refused:
        open_registry(db_url)
    message = str(refused.value)
    assert "schema version 99" in message and f"up to {SCHEMA_VERSION}" in message
    where = db_url.split("?")[0].rsplit("/", 1)[-1]
    assert where in message
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", db_url, "list"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "schema version 99" in proc.stderr


def test_a_file_that_is_not_a_registry_is_one_clear_line(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("not a database, just text\n" * 100)
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", str(path), "list"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"cloudseed instances: registry {path}: file is not a database"


def test_an_empty_version_table_is_refused_not_guessed(tmp_path):
    path = str(tmp_path / "r.db")
    open_registry(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM schema_version")
    conn.commit()
    conn.close()
    with pytest.raises(RegistryError, match="schema_version table is empty"):
        open_registry(path)
