"""The change feed under concurrent writers, on a real PostgreSQL (issue 16 item 6).

Servers follow the ``changes`` table as "everything after the last sequence number I saw". A
writer that drew sequence number 10 but commits after the writer holding 11 would be skipped
forever by a server that read 11 in between. The first test builds exactly that interleaving
(a writer that pauses between logging its change and committing); the second runs several
writers and several servers' caches (the real ``InstanceCache`` watcher) and checks that every
server ends with the final record of every instance.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import threading
import time

import pytest

from cloudseed.provider.registry import InstanceRecord, open_registry
from cloudseed.provider.server.instance_cache import CachedInstance, InstanceCache


@pytest.fixture
def pg_url(pg_cluster):
    return pg_cluster.new_database()


def _record(instance_id: str, n: int) -> InstanceRecord:
    return InstanceRecord(instance_id=instance_id, hostname=f"{instance_id}-0",
                          addresses=[{"address": f"10.1.{n // 250}.{n % 250 + 1}", "network": "feed"}])


def test_a_change_committed_out_of_sequence_order_is_not_skipped(pg_url):
    slow, fast, reader = open_registry(pg_url), open_registry(pg_url), open_registry(pg_url)
    try:
        slow.add(_record("i-slow", 1))
        fast.add(_record("i-fast", 2))
        seq, _ = reader.changes_since(-1)
        logged = threading.Event()

        def slow_writer() -> None:  # logs its change (draws a sequence number), commits 1 s later
            with slow._transaction() as cur:
                cur.execute("UPDATE instances SET hostname = 'i-slow-1' WHERE instance_id = 'i-slow'")
                slow._log_change(cur, "i-slow")
                logged.set()
                time.sleep(1.0)

        writers = [threading.Thread(target=slow_writer)]
        writers[0].start()
        assert logged.wait(10)
        writers.append(threading.Thread(target=lambda: fast.update("i-fast", hostname="i-fast-1")))
        writers[1].start()
        time.sleep(0.4)  # the fast writer would have committed by now, had it not waited its turn
        seen: set[str] = set()
        seq, ids = reader.changes_since(seq)
        seen.update(ids)
        for writer in writers:
            writer.join(15)
        seq, ids = reader.changes_since(seq)
        seen.update(ids)
        assert seen == {"i-slow", "i-fast"}
    finally:
        for registry in (slow, fast, reader):
            registry.close()


class _Server:
    """One server's cache of the registry, following the change feed on its own connection."""

    def __init__(self, url: str):
        self.registry = open_registry(url)
        self.executor = concurrent.futures.ThreadPoolExecutor(1)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.cache = InstanceCache(self.registry, self.executor)
        self.cache.start_watching(self.loop, poll_timeout=0.2)

    def read(self, instance_id: str) -> None:
        asyncio.run_coroutine_threadsafe(self.cache.by_id(instance_id), self.loop).result(10)

    def cached_hostnames(self) -> dict[str, str]:
        async def snapshot() -> dict[str, str]:
            return {k: v.record.hostname for k, v in self.cache.instances.items() if isinstance(v, CachedInstance)}

        return asyncio.run_coroutine_threadsafe(snapshot(), self.loop).result(10)

    def close(self) -> None:
        self.cache.stop_watching()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.executor.shutdown()
        self.registry.close()


def test_several_writers_and_servers_end_with_every_final_record(pg_url):
    ids = [f"i-feed-{n}" for n in range(12)]
    with open_registry(pg_url) as setup:
        setup.add_many(_record(instance_id, n) for n, instance_id in enumerate(ids))
    servers = [_Server(pg_url) for _ in range(3)]
    writers_done = threading.Event()
    final: dict[str, str] = {}
    errors: list[BaseException] = []

    def writer(mine: list[str], rounds: int) -> None:
        try:
            with open_registry(pg_url) as registry:
                for k in range(1, rounds + 1):
                    for instance_id in mine:
                        registry.update(instance_id, hostname=f"{instance_id}-{k}")
                        final[instance_id] = f"{instance_id}-{k}"
        except BaseException as error:  # reported below
            errors.append(error)

    def reader(server: _Server, seed: int) -> None:
        rng = random.Random(seed)
        while not writers_done.is_set():
            server.read(rng.choice(ids))  # keep the caches full while the records change
            time.sleep(0.002)

    try:
        writers = [threading.Thread(target=writer, args=(ids[w::4], 15)) for w in range(4)]
        readers = [threading.Thread(target=reader, args=(s, n)) for n, s in enumerate(servers)]
        for thread in readers + writers:
            thread.start()
        for thread in writers:
            thread.join(120)
        writers_done.set()
        for thread in readers:
            thread.join(30)
        assert not errors, errors
        for server in servers:
            for instance_id in ids:
                server.read(instance_id)
        deadline = time.monotonic() + 5
        while True:
            stale = [(n, k, v, final[k]) for n, s in enumerate(servers)
                     for k, v in s.cached_hostnames().items() if v != final[k]]
            if not stale or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert not stale, f"servers serve stale records: {stale[:5]}"
    finally:
        for server in servers:
            server.close()
