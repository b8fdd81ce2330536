"""Registry loads of the server's instance cache under a storm and a stalled database.

A real SQLite registry on the cache's one worker thread; the registry's address lookup is wrapped
only to count calls and to hold them (as a database that is slow or has stopped answering holds
them). Checks: requests for one address share one load; a load lands in the cache even when every
request waiting for it gave up with 503 (their retries are hits); a busy registry thread is waited
for, a stalled one is answered RegistryUnavailable after ``load_wait`` seconds; a load that raced
with a change is used, never cached.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
import time

import pytest

from cloudseed.provider.registry import InstanceRecord, RegistryUnavailable, open_registry
from cloudseed.provider.server import instance_cache
from cloudseed.provider.server.instance_cache import AMBIGUOUS, MISSING, CachedInstance, InstanceCache


class HeldLookups:
    """Counts the registry's address lookups (one per trip of the registry thread, for every
    address of the trip) and holds each until ``gate`` is set."""

    def __init__(self, registry, delay: float = 0.0):
        self.real = registry.find_by_addresses
        self.calls = 0
        self.batches: list[list[str]] = []
        self.delay = delay
        self.gate = threading.Event()
        self.gate.set()
        registry.find_by_addresses = self

    def __call__(self, addresses, network):
        self.calls += 1
        self.batches.append(list(addresses))
        self.gate.wait(30)
        time.sleep(self.delay)
        return self.real(addresses, network)


@pytest.fixture
def one_per_trip(monkeypatch):
    """Each address its own registry trip (as before batches): a thread busy with many trips."""
    monkeypatch.setattr(instance_cache, "MAX_BATCH", 1)


@pytest.fixture
def cache(tmp_path):
    registry = open_registry(str(tmp_path / "registry.db"))
    registry.add_many([InstanceRecord(instance_id=f"i-load-{n}", hostname=f"load-{n}",
                                      addresses=[{"address": f"10.61.0.{n + 1}", "network": None}])
                       for n in range(20)])
    executor = concurrent.futures.ThreadPoolExecutor(1)
    try:
        yield InstanceCache(registry, executor, load_wait=0.5)
    finally:
        executor.shutdown()
        registry.close()


def test_requests_for_one_address_share_one_load(cache):
    held = HeldLookups(cache.registry)
    held.gate.clear()

    async def storm():
        asks = [asyncio.ensure_future(cache.by_address(None, "10.61.0.3")) for _ in range(50)]
        await asyncio.sleep(0.1)
        held.gate.set()
        return await asyncio.gather(*asks)

    found = asyncio.run(storm())
    assert held.calls == 1
    assert {entry.instance_id for entry in found} == {"i-load-2"}
    assert len({id(entry) for entry in found}) == 1  # the very entry that was cached
    assert cache.cached_by_address(None, "10.61.0.3") is found[0]


def test_a_storm_of_new_addresses_is_read_in_batches(cache):
    """Addresses asked while a trip is under way go together in the next trip, MAX_BATCH at most,
    and each request gets its own instance (or nobody, or several) as a trip of one would give it."""
    cache.registry.add_many([InstanceRecord(instance_id=f"i-storm-{n}", hostname=f"storm-{n}",
                                            addresses=[{"address": f"10.62.{n // 250}.{n % 250 + 1}", "network": None}])
                             for n in range(600)])
    cache.registry.add(InstanceRecord(instance_id="i-twin", hostname="twin",
                                      addresses=[{"address": "10.62.0.1", "network": "other"}]))
    # this test is about the batches' shape, not about a stalled registry: a slow machine may take
    # longer than the fixture's 0.5 s for one batch of 256, which is the thread working, not gone
    cache.load_wait = 30.0
    held = HeldLookups(cache.registry)
    held.gate.clear()
    addresses = [f"10.62.{n // 250}.{n % 250 + 1}" for n in range(600)] + ["10.63.0.1"]

    async def storm():
        first = asyncio.ensure_future(cache.by_address(None, "10.61.0.1"))  # its trip holds the thread
        await asyncio.sleep(0.1)
        asks = [asyncio.ensure_future(cache.by_address(None, address)) for address in addresses]
        await asyncio.sleep(0.1)
        held.gate.set()
        return await first, await asyncio.gather(*asks)

    first, found = asyncio.run(storm())
    assert first.instance_id == "i-load-0"
    assert [len(batch) for batch in held.batches] == [1, 256, 256, 89]
    assert found[0] is AMBIGUOUS  # 10.62.0.1 is on two networks and the listener names none
    assert [entry.instance_id for entry in found[1:600]] == [f"i-storm-{n}" for n in range(1, 600)]
    assert found[600] is None
    assert cache.cached_by_address(None, "10.62.0.2") is found[1]
    assert cache.cached_by_address(None, "10.63.0.1") is None


def test_the_switch_interval_is_short_only_while_address_loads_are_under_way(cache):
    """The registry thread lets the GIL go at each row SQLite reads; while it has address loads
    the interpreter's switch interval is TRIP_SWITCH_INTERVAL, so that a busy event loop gives the
    GIL back within it, and the process's own interval is back once the last trip is done."""
    held = HeldLookups(cache.registry)
    held.gate.clear()
    before = sys.getswitchinterval()

    async def scenario():
        asks = [asyncio.ensure_future(cache.by_address(None, f"10.61.0.{n + 1}")) for n in range(3)]
        await asyncio.sleep(0.1)
        during = sys.getswitchinterval()
        held.gate.set()
        await asyncio.gather(*asks)
        return during

    during = asyncio.run(scenario())
    assert during == pytest.approx(min(instance_cache.TRIP_SWITCH_INTERVAL, before))
    assert len(held.batches) == 2  # the first address alone, the two asked during its trip together
    assert sys.getswitchinterval() == before


def test_a_load_that_lands_after_its_requests_gave_up_is_cached(cache):
    held = HeldLookups(cache.registry)
    held.gate.clear()

    async def scenario():
        started = time.monotonic()
        with pytest.raises(RegistryUnavailable, match="did not answer within 0.5s"):
            await cache.by_address(None, "10.61.0.4")
        waited = time.monotonic() - started
        assert cache.cached_by_address(None, "10.61.0.4") is MISSING
        with pytest.raises(RegistryUnavailable):  # the retry joins the load still under way
            await cache.by_address(None, "10.61.0.4")
        held.gate.set()
        for _ in range(100):
            await asyncio.sleep(0.02)
            if cache.cached_by_address(None, "10.61.0.4") is not MISSING:
                break
        return waited

    waited = asyncio.run(scenario())
    assert 0.45 <= waited < 2.0
    entry = cache.cached_by_address(None, "10.61.0.4")
    assert isinstance(entry, CachedInstance) and entry.instance_id == "i-load-3"
    assert held.calls == 1  # one lookup for both requests; the next request is a hit


def test_a_busy_registry_thread_is_waited_for_a_stalled_one_is_not(cache, one_per_trip):
    held = HeldLookups(cache.registry, delay=0.2)  # each load 0.2 s: twelve queued take 2.4 s

    async def busy():
        started = time.monotonic()
        found = await asyncio.gather(*(cache.by_address(None, f"10.61.0.{n + 1}") for n in range(12)))
        return found, time.monotonic() - started

    found, took = asyncio.run(busy())
    assert [entry.instance_id for entry in found] == [f"i-load-{n}" for n in range(12)]
    assert took > 2 * cache.load_wait  # longer than load_wait, and still no 503: the thread was working

    held.delay = 0.0
    held.gate.clear()  # now nothing finishes

    async def stalled():
        started = time.monotonic()
        results = await asyncio.gather(*(cache.by_address(None, f"10.61.0.{n + 13}") for n in range(4)),
                                       cache.by_id("i-load-19"), return_exceptions=True)
        return results, time.monotonic() - started

    results, took = asyncio.run(stalled())
    held.gate.set()
    assert all(isinstance(result, RegistryUnavailable) for result in results), results
    assert took < 4 * cache.load_wait


def test_a_load_that_raced_with_a_change_is_used_but_not_cached(cache):
    held = HeldLookups(cache.registry)
    held.gate.clear()

    async def scenario():
        ask = asyncio.ensure_future(cache.by_address(None, "10.61.0.6"))
        await asyncio.sleep(0.1)
        cache.invalidate(["i-load-5"])  # a change reported while the load runs
        held.gate.set()
        return await ask

    entry = asyncio.run(scenario())
    assert entry.instance_id == "i-load-5"
    assert cache.cached_by_address(None, "10.61.0.6") is MISSING
    assert cache.cached("i-load-5") is MISSING


def test_health_stays_ok_while_the_registry_thread_is_busy_not_when_it_stalls(cache, one_per_trip):
    """/health (the balancer's check): a storm's queue of reads on the registry thread is a busy
    registry, not a lost one; a thread whose reads stopped succeeding is unhealthy within a second."""
    from cloudseed.provider.server.admin.admin_app import AdminApp
    from cloudseed.provider.server.engine.http import Request
    from cloudseed.provider.server.metrics import Metrics

    admin = AdminApp(cache.registry, cache, Metrics(), None)
    held = HeldLookups(cache.registry, delay=0.15)  # twelve queued reads: 1.8 s of work

    def health():
        cache._contact = time.monotonic()  # as the change-log watcher (not running here) would
        return admin.handle(Request("GET", "/health", "HTTP/1.1", {}, b"", "127.0.0.1", None, "/health"))

    async def scenario():
        storm = asyncio.gather(*(cache.by_address(None, f"10.61.0.{n + 1}") for n in range(12)))
        await asyncio.sleep(0.6)
        started = time.monotonic()
        busy = await health()
        busy_took = time.monotonic() - started
        await storm
        held.delay = 0.0
        held.gate.clear()  # reads stop answering
        asks = asyncio.gather(*(cache.by_address(None, f"10.61.0.{n + 13}") for n in range(3)),
                              return_exceptions=True)
        await asyncio.sleep(1.1)
        stalled = await health()
        held.gate.set()
        await asks
        return busy, busy_took, stalled

    busy, busy_took, stalled = asyncio.run(scenario())
    assert busy.status == 200, busy.body
    assert busy_took < 0.5  # not queued behind the storm's reads
    assert stalled.status == 503 and b"registry unreachable" in stalled.body
