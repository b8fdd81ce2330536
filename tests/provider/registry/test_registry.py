"""The instance registry against SQLite and a real PostgreSQL: CRUD, filters, conflicts, changes."""

from __future__ import annotations

import os
import threading
import time

import pytest

from cloudseed.provider.registry import InstanceRecord, RecordError, RegistryError, open_registry

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx3 alice@example"


def make(instance_id: str, address: str = "10.0.0.5", network: str = "net-a", **extra) -> InstanceRecord:
    fields = dict(hostname=f"host-{instance_id}", addresses=[{"address": address, "network": network}],
                  macs=["52:54:00:AA:BB:01"], ssh_keys=[{"name": "alice", "data": KEY}],
                  user_data=b"#cloud-config\nhostname: x\n", vendor_data={"cloud-init": "#cloud-config\n"},
                  tags=["web"])
    fields.update(extra)
    return InstanceRecord(instance_id=instance_id, **fields)


def test_add_get_roundtrip(db_url):
    with open_registry(db_url) as registry:
        record = make("i-1", meta={"role": "db"}, imds_tokens="required")
        registry.add(record)
        got = registry.get("i-1")
    assert got is not None
    assert got.hostname == "host-i-1"
    assert got.addresses == [{"address": "10.0.0.5", "network": "net-a"}]
    assert got.macs == ["52:54:00:aa:bb:01"]  # normalised to lower case
    assert got.ssh_keys == [{"name": "alice", "type": "ssh-ed25519", "data": KEY}]
    assert got.user_data == b"#cloud-config\nhostname: x\n"
    assert got.vendor_data == {"cloud-init": "#cloud-config\n"}
    assert got.meta == {"role": "db"} and got.imds_tokens == "required" and got.tags == {"web": ""}
    assert got.created_at == record.created_at


def test_get_unknown_is_none(db_url):
    with open_registry(db_url) as registry:
        assert registry.get("nope") is None
        assert registry.delete("nope") is False


def test_duplicate_id_and_address_conflicts_name_the_field(db_url):
    with open_registry(db_url) as registry:
        registry.add(make("i-1"))
        with pytest.raises(RegistryError) as dup:
            registry.add(make("i-1", address="10.0.0.9"))
        assert dup.value.field == "instance_id" and dup.value.status == 409
        with pytest.raises(RegistryError) as taken:
            registry.add(make("i-2"))
        assert taken.value.field == "addresses[0].address" and "i-1" in str(taken.value)
        # the same address on another network is fine: overlapping tenant ranges
        registry.add(make("i-3", network="net-b"))
        assert sorted(registry.find_by_address("10.0.0.5")) == ["i-1", "i-3"]
        assert registry.find_by_address("10.0.0.5", "net-b") == ["i-3"]
        assert registry.get("i-2") is None  # nothing half-written
        assert registry.count() == 2


def test_add_many_is_all_or_nothing(db_url):
    with open_registry(db_url) as registry:
        with pytest.raises(RegistryError):
            registry.add_many([make("i-1"), make("i-2", address="10.0.0.6"), make("i-3", address="10.0.0.6")])
        assert registry.count() == 0


def test_update_validates_and_keeps_other_fields(db_url):
    with open_registry(db_url) as registry:
        registry.add(make("i-1"))
        registry.add(make("i-2", address="10.0.0.6"))
        updated = registry.update("i-1", hostname="renamed", tags=["db", "prod"])
        assert updated.hostname == "renamed" and updated.user_data == b"#cloud-config\nhostname: x\n"
        assert registry.get("i-1").tags == {"db": "", "prod": ""}
        with pytest.raises(RecordError) as bad:
            registry.update("i-1", addresses=[{"address": "10.0.0.300", "network": "n"}])
        assert bad.value.field == "addresses[0].address"
        with pytest.raises(RegistryError) as taken:
            registry.update("i-1", addresses=["10.0.0.6@net-a"])
        assert taken.value.status == 409
        with pytest.raises(RegistryError) as missing:
            registry.update("nope", hostname="x")
        assert missing.value.status == 404
        assert registry.get("i-1").addresses == [{"address": "10.0.0.5", "network": "net-a"}]


def test_list_filters(db_url):
    with open_registry(db_url) as registry:
        registry.add(make("i-1", project_id="p1"))
        registry.add(make("i-2", address="10.0.0.6", project_id="p2", tags=["db"]))
        registry.add(make("i-3", network="net-b", project_id="p1", availability_zone="az2"))
        ids = lambda **f: [r.instance_id for r in registry.list(**f)]  # noqa: E731
        assert ids() == ["i-1", "i-2", "i-3"]
        assert ids(project_id="p1") == ["i-1", "i-3"]
        assert ids(network="net-b") == ["i-3"]
        assert ids(address="10.0.0.5") == ["i-1", "i-3"]
        assert ids(tag="db") == ["i-2"]
        assert ids(availability_zone="az2") == ["i-3"]
        assert ids(hostname="host-i-2") == ["i-2"]
        assert ids(limit=1, offset=1) == ["i-2"]
        with pytest.raises(RegistryError):
            registry.list(colour="red")


def test_password_set_once_and_clear(db_url):
    with open_registry(db_url) as registry:
        registry.add(make("i-1"))
        assert registry.set_password_once("i-1", "secret1")
        assert not registry.set_password_once("i-1", "secret2")
        assert registry.get("i-1").password == "secret1"
        assert registry.clear_password("i-1")
        assert registry.set_password_once("i-1", "secret3")


def test_phone_home_kept_per_instance_and_removed_with_it(db_url):
    with open_registry(db_url) as registry:
        registry.add(make("i-1"))
        registry.add_phone_home("i-1", "10.0.0.5", {"hostname": "vm", "instance_id": "i-1"})
        posts = registry.phone_home("i-1")
        assert posts[0]["fields"] == {"hostname": "vm", "instance_id": "i-1"}
        assert posts[0]["source"] == "10.0.0.5"
        registry.delete("i-1")
        assert registry.phone_home("i-1") == []


def test_changes_are_seen_by_a_second_connection(db_url):
    with open_registry(db_url) as writer, open_registry(db_url) as reader:
        seq, _ = reader.changes_since(-1)
        woke = threading.Event()

        def wait():
            reader.wait_for_change(5)
            woke.set()

        thread = threading.Thread(target=wait)
        thread.start()
        started = time.monotonic()
        writer.add(make("i-1"))
        thread.join(6)
        assert woke.is_set() and time.monotonic() - started < 1.0
        new_seq, changed = reader.changes_since(seq)
        assert changed == ["i-1"] and new_seq > seq
        writer.update("i-1", hostname="h2")
        writer.delete("i-1")
        assert reader.changes_since(new_seq)[1] == ["i-1"]


def test_shared_setting_created_once(db_url):
    with open_registry(db_url) as one, open_registry(db_url) as two:
        assert one.shared_setting("k", lambda: "first") == "first"
        assert two.shared_setting("k", lambda: "second") == "first"


@pytest.mark.parametrize("data, field", [
    ({"instance_id": "bad id"}, "instance_id"),
    ({"instance_id": "i", "hostname": "-x-"}, "hostname"),
    ({"instance_id": "i", "macs": ["zz"]}, "macs[0]"),
    ({"instance_id": "i", "ssh_keys": [{"data": "not a key"}]}, "ssh_keys[0].data"),
    ({"instance_id": "i", "user_data": "x" * 70000}, "user_data"),
    ({"instance_id": "i", "user_data_b64": "!!"}, "user_data_b64"),
    ({"instance_id": "i", "imds_tokens": "sometimes"}, "imds_tokens"),
    ({"instance_id": "i", "network_data": {"links": {}}}, "network_data.links"),
    ({"instance_id": "i", "colour": "red"}, "colour"),
    ({"hostname": "x"}, "instance_id"),
])
def test_invalid_records_name_the_field(data, field):
    with pytest.raises(RecordError) as error:
        InstanceRecord.from_dict(data)
    assert error.value.field == field


def test_sqlite_file_is_private_and_wal(tmp_path):
    path = tmp_path / "sub" / "server.db"
    open_registry(f"sqlite:///{path}").close()
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    import sqlite3

    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_unsupported_url_is_a_clear_error():
    with pytest.raises(RegistryError, match="unsupported database URL"):
        open_registry("mysql://x")
