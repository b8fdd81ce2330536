"""Where a boot storm's new instances wait inside the server: run ``cloudseed serve`` with the
registry loads timed (bench/server_storm.py ``--trace``; nothing of it is in the server itself).

    python bench/storm_trace.py OUT.jsonl serve --db ... --listen ...

runs ``cloudseed`` with its arguments after wrapping ``InstanceCache.by_address`` and the
registry thread's jobs, and writes one JSON line per address load when the server stops:
``peer``, ``asked`` (the first request's ``by_address`` call: Python has accepted and read it),
``began`` and ``ended`` (the load on the registry thread), ``landed`` (the loop ran the load's
completion) and ``answered`` (``by_address`` returned to the request), all ``time.time()``
seconds, comparable with the storm client's start.
"""

from __future__ import annotations

import atexit
import json
import runpy
import sys
import threading
import time


def install(out: str) -> None:
    from cloudseed.provider.server import instance_cache

    cache_type = instance_cache.InstanceCache
    records: dict[str, dict] = {}
    lock = threading.Lock()
    original_by_address = cache_type.by_address
    batched = hasattr(cache_type, "_load_addresses")  # a tree that reads new addresses in batches
    original_load = cache_type._load_addresses if batched else cache_type._load_address

    async def by_address(self, network, address):  # type: ignore[no-untyped-def]
        entry = records.setdefault(address, {"peer": address})
        entry.setdefault("asked", time.time())
        result = await original_by_address(self, network, address)
        entry.setdefault("answered", time.time())
        return result

    def note(addresses: list, began: float) -> None:
        ended = time.time()
        with lock:
            for address in addresses:
                entry = records.setdefault(address, {"peer": address})
                entry.setdefault("began", began)
                entry.setdefault("ended", ended)
                entry.setdefault("batch", len(addresses))

    def load_addresses(self, keys):  # type: ignore[no-untyped-def]
        began = time.time()
        result = original_load(self, keys)
        note([address for _, address in keys], began)
        return result

    def load_address(self, address, network):  # type: ignore[no-untyped-def]
        began = time.time()
        result = original_load(self, address, network)
        note([address], began)
        return result

    original_landed = cache_type._landed

    def landed(self, key, generation, future):  # type: ignore[no-untyped-def]
        entry = records.get(key[1])
        if entry is not None:
            entry.setdefault("landed", time.time())
        return original_landed(self, key, generation, future)

    cache_type.by_address = by_address  # type: ignore[method-assign]
    if batched:
        cache_type._load_addresses = load_addresses  # type: ignore[method-assign]
    else:
        cache_type._load_address = load_address  # type: ignore[method-assign]
    cache_type._landed = landed  # type: ignore[method-assign]

    def dump() -> None:
        with open(out, "w") as handle:
            for entry in records.values():
                handle.write(json.dumps(entry) + "\n")

    atexit.register(dump)


def main() -> None:
    out = sys.argv[1]
    install(out)
    sys.argv = ["cloudseed"] + sys.argv[2:]
    runpy.run_module("cloudseed", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
