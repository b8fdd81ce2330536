"""Where a new instance's first crawl spends the server's Python time, per request kind.

    .venv/bin/python bench/first_crawl.py [--instances 20000] [--count 1000] [--profile FILE]

A boot storm of new instances (bench/server_storm.py) costs per instance one registry read and
the rendering of every answer it asks for the first time; the C fast path answers the rest
(engine/fast_path.c). This runs that work in process, without sockets, for ``--count``
instances of a registry of ``--instances`` (bench/server_cpu.py's, made on first use): the
registry read the worker thread makes, then cloud-init 22.4's OpenStack crawl
(``server_bench.OPENSTACK_BOOT``) through ``MetadataApp.handle`` as the server routes it, and
each answer encoded once as it is sent. It prints the CPU time per instance of each kind of
work (``process_time``, this process alone), the sum, and with ``--profile`` writes cProfile
stats of the whole loop. The connection costs (accept, read, send, close) are not here:
bench/server_cpu.py counts everything, under callgrind too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

import server_bench  # noqa: E402
from server_cpu import cached_db  # noqa: E402

from cloudseed.provider.registry import open_registry  # noqa: E402
from cloudseed.provider.server.config import ServerConfig  # noqa: E402
from cloudseed.provider.server.engine.http import Request, Response  # noqa: E402
from cloudseed.provider.server.engine.transport import Listener  # noqa: E402
from cloudseed.provider.server.imds_tokens import TokenIssuer  # noqa: E402
from cloudseed.provider.server.instance_cache import CachedInstance, InstanceCache  # noqa: E402
from cloudseed.provider.server.metadata_app import MetadataApp  # noqa: E402
from cloudseed.provider.server.metrics import Metrics  # noqa: E402
from cloudseed.provider.server.rate_limit import RateLimiter  # noqa: E402

HEADERS = {"host": "169.254.169.254", "user-agent": "Cloud-Init/22.4", "accept-encoding": "gzip, deflate",
           "accept": "*/*", "connection": "keep-alive"}


def kind_of(path: str, seen: set) -> str:
    """The kind of work a crawl request is: its first time, or a repeat (C's, in the server)."""
    if path in seen:
        return "repeat (C answers it)"
    if path == "/openstack":
        return "first request (routing, versions listing)"
    if path.startswith("/openstack/"):
        return "openstack " + path.rsplit("/", 1)[1]
    if path.endswith("/meta-data/"):
        return "ec2 meta-data/ (the tree's answers)"
    return "ec2 other first"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=20_000)
    parser.add_argument("--count", type=int, default=1000, help="new instances crawled")
    parser.add_argument("--profile", metavar="FILE", help="cProfile stats of the crawls to FILE")
    args = parser.parse_args()
    db = cached_db(args.instances)
    registry = open_registry(db)
    cache = InstanceCache(registry, None, 600)  # type: ignore[arg-type]  # loads are made here, in line
    app = MetadataApp(ServerConfig(db=db), registry, cache, TokenIssuer(os.urandom(32)), RateLimiter(0, 0),
                      Metrics())
    listener = Listener("127.0.0.1", 0, None)
    spent: dict[str, float] = defaultdict(float)
    clock = time.process_time
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    first = args.instances - args.count
    for index in range(first, args.instances):
        peer = server_bench.address_of(index)
        started = clock()
        ids, loaded = cache._load_address(peer, None)  # what the worker thread does for a new address
        cache.addresses[(None, peer)] = ids[0]
        cache.instances[ids[0]] = CachedInstance(*loaded)  # type: ignore[misc]
        spent["registry read (address, record, timeline)"] += clock() - started
        seen: set = set()
        for method, path in server_bench.OPENSTACK_BOOT:
            kind = kind_of(path, seen)
            seen.add(path)
            started = clock()
            request = Request(method, path, "HTTP/1.1", HEADERS, b"", peer, listener, path)
            answer = app.handle(request)
            assert answer.__class__ is Response and answer.status == 200, (path, answer)
            answer.encode(True)  # sent: encoded once (by C or the connection)
            spent[kind] += clock() - started
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    total = sum(spent.values())
    print(f"first crawl of {args.count} new instances, Python CPU per instance (process_time):")
    for kind, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        print(f"  {kind:45s} {seconds / args.count * 1e6:8.1f} us  {seconds / total * 100:5.1f} %")
    print(f"  {'total':45s} {total / args.count * 1e6:8.1f} us")
    registry.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
