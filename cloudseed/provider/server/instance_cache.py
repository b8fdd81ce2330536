"""In-memory view of the registry for the hot path: who is at an address, rendered responses.

A hit costs two dict lookups. Misses are loaded from the registry on one worker thread (new
addresses in batches: those asked while a trip is under way go together in the next, three
statements per batch), and a request waiting for a load while that thread has finished nothing
for ``load_wait`` seconds (a database cut off) is answered 503 instead of being held (behind a
balancer, another server answers); a thread that is merely busy (a storm of new instances) is
waited for. Requests for an
address already being loaded share that load, and its result is cached when it lands even if
every request waiting for it has given up, so their retries are hits. A watcher thread follows
the registry's change log (``changes_since``; PostgreSQL NOTIFY wakes it at once) and drops
changed instances; loads that raced with a change are used once, not cached. A changed instance
that was cached is loaded again at once, in the background, so that the instances a server has
seen stay cached even if the registry becomes unavailable right after a change.
``contact_age`` (seconds since the watcher last heard from the registry) is what ``/health``
reports without waiting for the database itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
import time
from typing import Any, Callable, Optional

from cloudseed.provider.registry import InstanceRecord, Registry, RegistryUnavailable

MISSING = object()  # not in the cache: ask the registry
AMBIGUOUS = "ambiguous"  # address on several networks, listener has no network


MAX_ROUTES = 512  # request paths remembered per instance (GET/HEAD answers)
MAX_ROUTE_PATH = 256  # longer request paths are answered but never remembered (clients' paths are short)
MAX_RESPONSES = 512  # rendered answers kept per instance; past it, answers are rendered per request
MAX_RESPONSE_BYTES = 1024 * 1024  # and at most this many bytes of them (keys included)
MAX_UNKNOWN_ADDRESSES = 50_000  # "nobody here" answers kept; more (a scan) forgets them all
# seconds without the registry after which nothing cached is trusted (the change log keeps an hour)
FORGET_AFTER_OUTAGE = 1800.0
MAX_REFRESH = 1000  # changed instances loaded again per batch of changes (more are loaded when asked)
MAX_BATCH = 256  # new addresses read in one registry trip (registry.MAX_TIMELINES at most)
# While address loads are on the registry thread, the interpreter's switch interval (how long a
# thread waiting for the GIL waits before it asks for it) is this instead of CPython's 5 ms: the
# thread lets the GIL go at each row SQLite reads, and the event loop, busy with a storm's
# connections, would make it wait up to 5 ms for each (a batch's rows took up to 0.6 s).
TRIP_SWITCH_INTERVAL = 0.0002
_trips = [0, 0.005]  # caches with address loads under way in this process, the interval they replaced


def _trip_begins() -> None:
    if _trips[0] == 0:
        _trips[1] = sys.getswitchinterval()
        sys.setswitchinterval(min(TRIP_SWITCH_INTERVAL, _trips[1]))
    _trips[0] += 1


def _trip_ends() -> None:
    _trips[0] -= 1
    if _trips[0] == 0:
        sys.setswitchinterval(_trips[1])


class CachedInstance:
    """A record and the responses already rendered for it.

    ``responses``: canonical key -> Response or factory (``meta_data.json`` with a fresh seed).
    ``routes``: request path as sent -> Response or factory: the GET/HEAD answer for that path,
    so a repeated request skips routing (the IMDSv2 token check still comes first, on every API).
    ``trees``: the EC2 meta-data tree of each version asked for, built once for all its leaves.
    ``events``: the instance's timeline (``registry/events.py``: ``Event`` tuples by start time),
    ``faults`` those of kind ``fault`` (checked before every answer while any exist),
    ``retired`` what its deleted events weighed (``registry.timeline``; Azure's DocumentIncarnation).
    All go away with the instance when the registry changes it.

    Bounded whatever the requests: ``remember`` keeps an answer only while the instance holds
    fewer than ``MAX_RESPONSES`` answers of ``MAX_RESPONSE_BYTES`` in all, and ``route`` a
    request path only up to ``MAX_ROUTES`` paths of at most ``MAX_ROUTE_PATH`` bytes; nothing is
    kept for a path that has no answer (404). A flood of distinct paths costs CPU, not memory.
    """

    __slots__ = ("record", "responses", "routes", "instance_id", "trees", "kept_bytes", "events", "faults",
                 "retired")

    def __init__(self, record: InstanceRecord, events: tuple = (), retired: int = 0):
        self.record = record
        self.instance_id = record.instance_id
        self.responses: dict[str, Any] = {}
        self.routes: dict[str, Any] = {}
        self.trees: dict[Any, Any] = {}  # EC2 meta-data tree per version (apis/ec2.py, render)
        self.kept_bytes = 0
        self.events = events
        self.retired = retired
        now = time.time()  # faults already over are not checked (the hot path stays open to the rest)
        self.faults = tuple(e for e in events if e.kind == "fault" and e.state == "scheduled"
                            and (e.not_after is None or e.not_after > now))

    def remember(self, key: str, answer: Any) -> Any:
        """Keep ``answer`` (a Response or a factory) under ``key`` if the bounds allow; returns it."""
        size = len(key) + len(getattr(answer, "body", b""))
        if len(self.responses) < MAX_RESPONSES and self.kept_bytes + size <= MAX_RESPONSE_BYTES:
            self.responses[key] = answer
            self.kept_bytes += size
        return answer

    def route_all(self, pairs: list[tuple[str, Any]]) -> None:
        """``route`` for many (path, answer) pairs made at once (an EC2 tree's answers), within the
        same bounds, the bytes of their bodies counted as ``remember`` counts them."""
        routes, kept = self.routes, self.kept_bytes
        if len(routes) + len(pairs) <= MAX_ROUTES:  # all of them, most often: their sizes at once
            size = sum([len(path) + len(getattr(answer, "body", b"")) for path, answer in pairs])
            if kept + size <= MAX_RESPONSE_BYTES and max([len(path) for path, _ in pairs], default=0) <= MAX_ROUTE_PATH:
                routes.update(pairs)
                self.kept_bytes = kept + size
                return
        for path, answer in pairs:
            size = len(path) + len(getattr(answer, "body", b""))
            if len(routes) >= MAX_ROUTES or kept + size > MAX_RESPONSE_BYTES:
                break
            if len(path) <= MAX_ROUTE_PATH:
                routes[path] = answer
                kept += size
        self.kept_bytes = kept

    def route(self, path: str, answer: Any) -> None:
        """Remember ``answer`` for the request path ``path`` (the hot path's lookup) if the bounds allow."""
        if len(self.routes) < MAX_ROUTES and len(path) <= MAX_ROUTE_PATH:
            self.routes[path] = answer


class InstanceCache:
    def __init__(self, registry: Registry, executor: concurrent.futures.Executor, load_wait: float = 3.0):
        self.registry = registry
        self.executor = executor
        self.load_wait = load_wait  # seconds a request waits for a registry load before it is answered 503
        self.instances: dict[str, Optional[CachedInstance]] = {}
        self.addresses: dict[tuple[Optional[str], str], Any] = {}  # -> instance id, None or AMBIGUOUS
        self.generation = 0
        self.invalidations = 0
        self.unknown = 0  # addresses remembered as belonging to nobody
        self._seq = -1
        self._contact = time.monotonic()  # when the watcher last heard from the registry
        self._finished = float("-inf")  # when a registry read on the worker thread last succeeded
        self._inflight: dict[tuple[Optional[str], str], asyncio.Future] = {}  # address loads under way
        self._asked: list[tuple[tuple[Optional[str], str], asyncio.Future]] = []  # for the next registry trip
        self._reading = False  # a trip of address loads is on the registry thread
        self._stop = threading.Event()
        self._watcher: Optional[threading.Thread] = None

    # -- hot path --------------------------------------------------------------------------
    def cached_by_address(self, network: Optional[str], address: str) -> Any:
        """CachedInstance, None (nobody), AMBIGUOUS, or MISSING (call ``by_address``)."""
        found = self.addresses.get((network, address), MISSING)
        if found is MISSING or found is None or found is AMBIGUOUS:
            return found
        return self.instances.get(found, MISSING)

    def cached(self, instance_id: str) -> Any:
        return self.instances.get(instance_id, MISSING)

    # -- loads -----------------------------------------------------------------------------
    async def by_address(self, network: Optional[str], address: str) -> Any:
        # one trip to the registry thread: who holds the address and, if it is one instance not
        # cached yet, its record and timeline too; the addresses asked while a trip is under way
        # go together in the next one (a storm of new instances: three statements per batch, not
        # per instance). Requests for an address already being loaded wait for that load, and the
        # load is cached when it lands, whoever still waits for it (a request that gave up with a
        # 503 leaves its retry a cache hit).
        key = (network, address)
        pending = self._inflight.get(key)
        if pending is None:
            loop = asyncio.get_running_loop()
            pending = self._inflight[key] = loop.create_future()
            generation = self.generation
            pending.add_done_callback(lambda future: self._landed(key, generation, future))
            self._asked.append((key, pending))
            if not self._reading:
                self._read_batch(loop)
        ids, loaded = await self._wait(pending)
        found = AMBIGUOUS if len(ids) > 1 else (ids[0] if ids else None)
        if found is None or found is AMBIGUOUS:
            return found
        cached = self.instances.get(found, MISSING)
        if cached is not MISSING:
            return cached
        if loaded is None:
            return await self.by_id(found)
        return CachedInstance(*loaded) if loaded[0] is not None else None  # raced with a change: used once

    def _read_batch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send the addresses asked since the last trip (at most MAX_BATCH) to the registry thread
        as one job; when it is done, the next batch goes, if anything was asked meanwhile."""
        batch, self._asked = self._asked[:MAX_BATCH], self._asked[MAX_BATCH:]
        if batch and not self._reading:
            _trip_begins()
        elif self._reading and not batch:
            _trip_ends()
        self._reading = bool(batch)
        if not batch:
            return
        job = loop.run_in_executor(self.executor, self._job, self._load_addresses, [key for key, _ in batch])
        job.add_done_callback(lambda done: self._batch_read(loop, batch, done))

    def _batch_read(self, loop: asyncio.AbstractEventLoop, batch: list, done: asyncio.Future) -> None:
        error = done.exception() if not done.cancelled() else asyncio.CancelledError()
        for key, future in batch:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(done.result()[key])
        self._read_batch(loop)

    def _landed(self, key: tuple[Optional[str], str], generation: int, future: asyncio.Future) -> None:
        """Keep what an address load found, unless the registry changed while it ran."""
        if self._inflight.get(key) is future:
            del self._inflight[key]
        if future.cancelled() or future.exception() is not None or generation != self.generation:
            return
        ids, loaded = future.result()
        found = AMBIGUOUS if len(ids) > 1 else (ids[0] if ids else None)
        if found is None:
            self.unknown += 1
            if self.unknown > MAX_UNKNOWN_ADDRESSES:  # a scan of unused addresses: start over
                self._forget_unknown()
                self.unknown = 1
        self.addresses[key] = found
        if loaded is not None and found not in (None, AMBIGUOUS) and found not in self.instances:
            self.instances[found] = CachedInstance(*loaded) if loaded[0] is not None else None

    async def by_id(self, instance_id: str) -> Optional[CachedInstance]:
        cached = self.instances.get(instance_id, MISSING)
        if cached is not MISSING:
            return cached  # type: ignore[return-value]
        generation = self.generation
        record, events, retired = await self.load(self._load, instance_id)
        entry = CachedInstance(record, events, retired) if record is not None else None
        if generation == self.generation:
            self.instances[instance_id] = entry
        return entry

    def _load(self, instance_id: str) -> tuple[Optional[InstanceRecord], tuple, int]:
        record = self.registry.get(instance_id)
        if record is None:
            return None, (), 0
        events, retired = self.registry.timeline(instance_id)
        return record, tuple(events), retired

    def _load_addresses(self, keys: list[tuple[Optional[str], str]]) -> dict[tuple[Optional[str], str], tuple]:
        """For each (network, address) key, in three statements (MAX_BATCH keys at most): the ids at
        the address, and for a single id not cached what ``_load`` gives for it (its record and
        timeline), else None."""
        per_network: dict[Optional[str], list[str]] = {}
        for network, address in keys:
            per_network.setdefault(network, []).append(address)
        ids_at: dict[tuple[Optional[str], str], list[str]] = {}
        for network, addresses in per_network.items():
            found = self.registry.find_by_addresses(addresses, network)
            for address in addresses:
                ids_at[(network, address)] = found.get(address, [])
        instances = self.instances
        wanted = {ids[0] for ids in ids_at.values() if len(ids) == 1 and ids[0] not in instances}
        records = self.registry.get_many(sorted(wanted)) if wanted else {}
        timelines = self.registry.timelines(sorted(records)) if records else {}
        loads: dict[tuple[Optional[str], str], tuple] = {}
        for key, ids in ids_at.items():
            if len(ids) != 1 or ids[0] not in wanted:  # nobody, several, or cached when asked
                loads[key] = (ids, None)
                continue
            record = records.get(ids[0])
            if record is None:
                loads[key] = (ids, (None, (), 0))
            else:
                events, retired = timelines.get(ids[0], ([], 0))
                loads[key] = (ids, (record, tuple(events), retired))
        return loads

    async def run(self, function: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    async def load(self, function: Callable, *args: Any) -> Any:
        """``run`` for a read a request waits on (``_wait``)."""
        future = asyncio.get_running_loop().run_in_executor(self.executor, self._job, function, *args)
        try:
            return await self._wait(future)
        except RegistryUnavailable:
            future.cancel()  # not begun yet: off the thread's queue (a dead database queues nothing)
            raise

    def _job(self, function: Callable, *args: Any) -> Any:
        """A registry job (in its thread), noting when one succeeded: the registry answers."""
        result = function(*args)
        self._finished = time.monotonic()
        return result

    def answered_within(self, seconds: float) -> bool:
        """Whether a registry read on the worker thread succeeded in the last ``seconds``."""
        return time.monotonic() - self._finished < seconds

    async def _wait(self, future: asyncio.Future) -> Any:
        """``future``'s result; RegistryUnavailable once the registry thread has finished nothing
        for ``load_wait`` seconds (a database that stopped answering). A thread that is busy with
        other loads (a storm of new instances) is waited for: it is slow, not gone."""
        waited_since = time.monotonic()
        while not future.done():
            idle = time.monotonic() - max(self._finished, waited_since)
            if idle >= self.load_wait:
                raise RegistryUnavailable(f"the registry did not answer within {self.load_wait:g}s; retry "
                                          "shortly")
            await asyncio.wait((future,), timeout=self.load_wait - idle)
        return future.result()

    def contact_age(self) -> float:
        """Seconds since the watcher last read the registry's change log."""
        return time.monotonic() - self._contact

    # -- invalidation ----------------------------------------------------------------------
    def invalidate(self, instance_ids: list[str]) -> None:
        """Forget these instances and every address mapping that might involve them."""
        self.generation += 1
        self.invalidations += len(instance_ids)
        self._inflight.clear()  # loads under way may hold the old state: later requests load again
        changed = set(instance_ids)
        seen = [k for k, v in self.addresses.items() if v in changed][:MAX_REFRESH]
        cached = [i for i in changed if self.instances.get(i) is not None][:MAX_REFRESH]
        for instance_id in changed:
            self.instances.pop(instance_id, None)
        # addresses may have moved between instances: drop mappings to changed ids and every
        # negative or ambiguous answer (a changed instance may now hold that address)
        for key in [k for k, v in self.addresses.items() if v is None or v is AMBIGUOUS or v in changed]:
            del self.addresses[key]
        self.unknown = 0
        if seen or cached:
            try:
                asyncio.get_running_loop().create_task(self._refresh(seen, cached))
            except RuntimeError:  # no loop (a tool using the cache): loaded when next asked
                pass

    async def _refresh(self, addresses: list, instance_ids: list[str]) -> None:
        """Load again what was cached before a change (the new record, where its addresses lead);
        again when another change raced with the load (it was then not kept)."""
        for _ in range(3):
            try:
                for network, address in addresses:
                    await self.by_address(network, address)
                for instance_id in instance_ids:
                    await self.by_id(instance_id)
            except Exception:  # the registry is away: loaded when next asked
                return
            if all(key in self.addresses for key in addresses) and all(i in self.instances for i in instance_ids):
                return

    def forget_all(self) -> None:
        """Drop every cached instance and address (after an outage longer than the change log keeps)."""
        self.generation += 1
        self._inflight.clear()
        self.instances.clear()
        self.addresses.clear()
        self.unknown = 0

    def _forget_unknown(self) -> None:
        for key in [k for k, v in self.addresses.items() if v is None]:
            del self.addresses[key]

    def start_watching(self, loop: asyncio.AbstractEventLoop, poll_timeout: float = 1.0) -> None:
        self._seq, _ = self.registry.changes_since(-1)

        def watch() -> None:
            failing, failing_since = False, 0.0
            while not self._stop.is_set():
                try:
                    if not failing:  # after a failure, read at once: what changed meanwhile sent no notice
                        self.registry.wait_for_change(poll_timeout)
                    if self._stop.is_set():
                        return
                    seq, ids = self.registry.changes_since(self._seq)
                except Exception as error:  # database away: keep serving from cache, retry
                    import logging

                    if not failing:  # once per outage, not once a second
                        logging.getLogger("cloudseed.server").warning(
                            "cannot follow registry changes (serving cached instances meanwhile): %s", error)
                        failing, failing_since = True, time.monotonic()
                    self._stop.wait(0.2)  # back within a moment of the registry
                    continue
                self._contact = time.monotonic()
                if failing:
                    import logging

                    logging.getLogger("cloudseed.server").warning("following registry changes again")
                    failing = False
                    if time.monotonic() - failing_since > FORGET_AFTER_OUTAGE:  # the log may have moved on
                        loop.call_soon_threadsafe(self.forget_all)
                self._seq = seq
                if ids:
                    loop.call_soon_threadsafe(self.invalidate, ids)

        self._watcher = threading.Thread(target=watch, name="registry-watcher", daemon=True)
        self._watcher.start()

    def stop_watching(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(3)
