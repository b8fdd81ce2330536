"""Running ``cloudseed serve``: open the registry, bind the listeners, serve until SIGTERM/SIGINT.

Graceful shutdown: stop accepting, let requests in flight finish (up to ``drain_seconds``),
close idle keep-alive connections, flush the access log, close the registry.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import os
import signal
import time
from bisect import bisect_left
from typing import Callable, Optional

from cloudseed.provider.registry import open_registry
from cloudseed.provider.server.access_log import AccessLog
from cloudseed.provider.server.admin_app import AdminApp
from cloudseed.provider.server.config import ListenSpec, ServerConfig
from cloudseed.provider.server.http import IDLE_TIMEOUT, Listener, Request, Response, start_listener
from cloudseed.provider.server.imds_tokens import TokenIssuer
from cloudseed.provider.server.instance_cache import InstanceCache
from cloudseed.provider.server.metadata_app import MetadataApp
from cloudseed.provider.server.metrics import BUCKETS, Metrics
from cloudseed.provider.server.rate_limit import RateLimiter
from cloudseed.provider.server.workers import Workers

LOG = logging.getLogger("cloudseed.server")
MAX_METADATA_BODY = 64 * 1024


def _api_of(path: str) -> str:
    initial = path[1:2]  # one comparison for most EC2 paths ("/latest/...", "/2021-03-23/...")
    if initial == "o" and path.startswith("/openstack"):
        return "openstack"
    if initial == "n" and path.startswith("/nocloud"):
        return "nocloud"
    if initial == "p" and path.startswith("/phone-home"):
        return "phone_home"
    if initial == "l" and path == "/latest/api/token":
        return "token"
    return "ec2"


async def serve(config: ServerConfig, ready: Optional[Callable[[list[Listener]], None]] = None,
                stop: Optional[asyncio.Event] = None, drain_seconds: float = 5.0) -> int:
    loop = asyncio.get_running_loop()
    registry = open_registry(config.db)
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="registry")
    cache = InstanceCache(registry, executor)
    metrics = Metrics()
    metrics.gauges["cached_instances"] = lambda: len(cache.instances)
    metrics.gauges["cache_invalidations_total"] = lambda: cache.invalidations
    key = registry.shared_setting("imds_token_key", lambda: os.urandom(32).hex())
    tokens = TokenIssuer(bytes.fromhex(key))
    limiter = RateLimiter(config.rate_limit, config.rate_burst)
    app = MetadataApp(config, registry, cache, tokens, limiter, metrics)
    admin = AdminApp(registry, cache, metrics, config.admin_token)
    log = AccessLog(config.access_log)
    connections: set = set()

    log_write = log.write if log.enabled else None
    perf_counter = time.perf_counter
    counts, histogram = metrics.requests, metrics.histogram

    def on_response(request: Request, response: Response) -> None:  # Metrics.observe, inlined
        seconds = perf_counter() - request.started
        path = request.path
        key = ("admin" if request.listener.kind == "admin" else _api_of(path), response.status)
        counts[key] = counts.get(key, 0) + 1
        histogram[bisect_left(BUCKETS, seconds)] += 1
        metrics.latency_sum += seconds
        metrics.latency_count += 1
        if log_write is not None:
            log_write(request.client, request.instance_id, request.method, path, response.status,
                      len(response.body), seconds)

    listeners = [Listener(spec.host, spec.port, spec.network) for spec in config.listen]
    if config.admin_listen is not None:
        spec = config.admin_listen
        listeners.append(Listener(spec.host, spec.port, None, kind="admin"))
    several = config.processes > 1
    try:
        for listener in listeners:
            listener.on_response = on_response
            handler = admin.handle if listener.kind == "admin" else app.handle
            body_limit = config.max_admin_body if listener.kind == "admin" else MAX_METADATA_BODY
            await start_listener(listener, handler, connections, body_limit,  # type: ignore[arg-type]
                                 reuse_port=config.reuse_port or (several and listener.kind != "admin"))
    except OSError as error:
        for listener in listeners:
            if listener.server is not None:
                listener.server.close()
        registry.close()
        raise OSError(error.errno, f"cannot listen on {listener.host}:{listener.port}: {error.strerror}")
    cache.start_watching(loop)
    stop = stop or asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    LOG.info("serving on %s", ", ".join(map(repr, listeners)))
    workers: Optional[Workers] = None
    if several:
        workers = Workers(dataclasses.replace(
            config, processes=1, reuse_port=True, admin_listen=None,
            listen=[ListenSpec(item.host, item.port, item.network) for item in listeners if item.kind != "admin"]),
            config.processes - 1)
        workers.start()
        metrics.gauges["processes"] = lambda: config.processes
    if ready is not None:
        ready(listeners)

    async def housekeeping() -> None:
        while True:
            await asyncio.sleep(0.5)
            log.flush()
            if workers is not None:
                workers.check()
            now = time.monotonic()
            for connection in list(connections):
                if connection.idle_for(now) > IDLE_TIMEOUT:
                    connection.close()

    chores = asyncio.ensure_future(housekeeping())
    try:
        await stop.wait()
    finally:
        LOG.info("shutting down")
        for listener in listeners:
            if listener.server is not None:
                listener.server.close()
        if workers is not None:
            await loop.run_in_executor(None, workers.stop, drain_seconds + 5)
        deadline = time.monotonic() + drain_seconds
        while any(c.busy for c in connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for connection in list(connections):
            connection.close()
        for listener in listeners:
            if listener.server is not None:
                listener.server.release()
        chores.cancel()
        cache.stop_watching()
        executor.shutdown(wait=True)
        log.close()
        registry.close()
    return 0
