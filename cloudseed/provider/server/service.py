"""Running ``cloudseed serve``: open the registry, bind the listeners, serve until SIGTERM/SIGINT.

Start: raise the open-file limit to the hard limit, so the connection caps (settings
``max_connections*``) decide who is served. Twice a second: flush the access log, restart
workers that exited, close connections past their deadlines. Graceful shutdown: stop accepting,
let requests in flight finish (up to ``drain_seconds``), close idle keep-alive connections,
flush the access log, close the registry.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import gc
import logging
import os
import signal
import time
from typing import Any, Callable, Optional

from cloudseed.provider.registry import open_registry
from cloudseed.provider.server.admin.admin_app import AdminApp
from cloudseed.provider.server.config import ListenSpec, ServerConfig
from cloudseed.provider.server.engine.access_log import AccessLog
from cloudseed.provider.server.engine.connection import ConnectionTable, Limits
from cloudseed.provider.server.engine.http import Request, Response
from cloudseed.provider.server.engine.transport import Listener, raise_open_file_limit, start_listener
from cloudseed.provider.server.imds_tokens import TokenIssuer
from cloudseed.provider.server.instance_cache import InstanceCache
from cloudseed.provider.server.metadata_app import MetadataApp
from cloudseed.provider.server.metrics import Metrics
from cloudseed.provider.server.rate_limit import RateLimiter
from cloudseed.provider.server.routes import api_of
from cloudseed.provider.server.workers import Workers

LOG = logging.getLogger("cloudseed.server")
MAX_METADATA_BODY = 64 * 1024
SPARE_FILES = 256  # descriptors kept for the registry, the log, workers' pipes...


def connection_table(config: ServerConfig, open_files: int) -> ConnectionTable:
    """The connection caps of ``config``; ``max_connections: 0`` means what the open files allow."""
    total = config.max_connections or max(64, open_files - SPARE_FILES)
    return ConnectionTable(config.max_connections_per_source, total,
                           tuple(config.proxies) + tuple(config.proxy_protocol_from))


def limits(config: ServerConfig, max_body: int) -> Limits:
    return Limits(max_body, config.max_pipelined, config.max_unsent_bytes, config.max_buffered_bytes,
                  config.head_timeout, config.idle_timeout)


def fast_path(config: ServerConfig, table: ConnectionTable, cache: InstanceCache, limiter: RateLimiter,
              metrics: Metrics, log: AccessLog) -> Any:
    """The C fast path for new connections (fast_path.py), unless it is not built or turned off;
    says which path runs."""
    from cloudseed.provider.server.engine import fast_path as fast_module

    if not config.fast_path or not fast_module.available():
        LOG.info("new connections: every one through the Python path (%s)",
                 "fast_path: false" if not config.fast_path else "the _fast_path extension is not built; "
                 "scripts/setup.sh builds it")
        return None
    from cloudseed.provider.server.imds_tokens import TOKEN_HEADER
    from cloudseed.provider.server.metrics import BUCKETS

    fast = fast_module.FastPath(asyncio.get_running_loop(), table, config.idle_timeout, cache.instances, limiter,
                                metrics, BUCKETS, log, api_of, TOKEN_HEADER)
    metrics.drains.append(fast.drain)
    metrics.gauges["fast_path_connections"] = lambda: fast.shared.open  # held by C (in open_connections too)
    metrics.gauges["fast_path_answered_total"] = lambda: fast.shared.answered
    LOG.info("new connections: cached answers in C (fast_path.c), every other request through the Python path")
    return fast


async def serve(config: ServerConfig, ready: Optional[Callable[[list[Listener]], None]] = None,
                stop: Optional[asyncio.Event] = None, drain_seconds: float = 5.0) -> int:
    loop = asyncio.get_running_loop()
    open_files = raise_open_file_limit()
    registry = open_registry(config.db)
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="registry")
    cache = InstanceCache(registry, executor, config.registry_wait)
    metrics = Metrics()
    metrics.gauges["cached_instances"] = lambda: len(cache.instances)
    metrics.gauges["cache_invalidations_total"] = lambda: cache.invalidations
    metrics.gauges["registry_contact_age_seconds"] = lambda: round(cache.contact_age(), 3)  # > 3: unhealthy
    key = registry.shared_setting("imds_token_key", lambda: os.urandom(32).hex())
    tokens = TokenIssuer(bytes.fromhex(key))
    limiter = RateLimiter(config.rate_limit, config.rate_burst)
    app = MetadataApp(config, registry, cache, tokens, limiter, metrics)
    admin = AdminApp(registry, cache, metrics, config.admin_token, app.credentials)
    log = AccessLog(config.access_log, config.access_log_max_bytes, config.access_log_backups)
    table = connection_table(config, open_files)
    metrics.gauges["open_connections"] = lambda: len(table)
    metrics.gauges["connections_refused_total"] = lambda: table.refused
    metrics.gauges["connections_timed_out_total"] = lambda: table.expired
    metrics.gauges["proxy_protocol_refused_total"] = lambda: table.proxy_refused

    log_write = log.write if log.enabled else None
    perf_counter = time.perf_counter
    observe = metrics.observe

    def on_response(request: Request, response: Response) -> None:
        seconds = perf_counter() - request.started
        observe("admin" if request.listener.kind == "admin" else request.api or api_of(request.path), response.status,
                seconds)
        if log_write is not None:
            log_write(request.client, request.instance_id, request.method, request.path, response.status,
                      len(response.body), seconds)

    listeners = [Listener(spec.host, spec.port, spec.network) for spec in config.listen]
    balancers = tuple(config.proxy_protocol_from)
    listeners.extend(Listener(s.host, s.port, s.network, balancers=balancers) for s in config.proxy_protocol_listen)
    if config.admin_listen is not None:
        spec = config.admin_listen
        listeners.append(Listener(spec.host, spec.port, None, kind="admin"))
    handlers = {"admin": admin.handle, "metadata": app.handle}
    if config.password_server_listen:  # CloudStack's / Exoscale's password server, in this process only
        from cloudseed.provider.server.password_server import PasswordServer

        handlers["password"] = PasswordServer(registry, cache, limiter, metrics, tokens, config.imds_tokens).handle
        listeners.extend(Listener(s.host, s.port, s.network, kind="password") for s in config.password_server_listen)
    tls_context: Any = None  # of the oci-auth-tls listeners (the OCI federation endpoint at auth.<region>...)
    if config.oci_auth_listen or config.oci_auth_tls_listen:  # OCI's federation endpoint, in this process only
        from cloudseed.provider.server.credentials.oci_federation import FederationServer

        handlers["oci-auth"] = handlers["oci-auth-tls"] = FederationServer(cache, app.credentials).handle
        listeners.extend(Listener(s.host, s.port, None, kind="oci-auth") for s in config.oci_auth_listen)
        if config.oci_auth_tls_listen:
            from cloudseed.provider.server.credentials.oci_auth_tls import server_context

            tls_context = server_context(registry)
            listeners.extend(Listener(s.host, s.port, None, kind="oci-auth-tls") for s in config.oci_auth_tls_listen)
    several = config.processes > 1
    fast = fast_path(config, table, cache, limiter, metrics, log)
    try:
        for listener in listeners:
            listener.on_response = on_response
            handler = handlers[listener.kind]
            body_limit = config.max_admin_body if listener.kind == "admin" else MAX_METADATA_BODY
            if listener.kind == "oci-auth-tls":
                from cloudseed.provider.server.engine.tls_listener import start_tls_listener

                await start_tls_listener(listener, handler, table, limits(config, body_limit), tls_context)
                continue
            reuse_port = config.reuse_port or (several and listener.kind == "metadata")
            if fast is not None and listener.kind == "metadata" and not listener.balancers:
                from cloudseed.provider.server.engine.fast_path import start_fast_listener

                await start_fast_listener(listener, handler, table, limits(config, body_limit), fast, reuse_port)
                continue
            await start_listener(listener, handler, table, limits(config, body_limit), reuse_port)  # type: ignore[arg-type]
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
            config, processes=1, reuse_port=True, admin_listen=None, password_server_listen=[], oci_auth_listen=[],
            oci_auth_tls_listen=[],
            listen=[ListenSpec(item.host, item.port, item.network) for item in listeners
                    if item.kind == "metadata" and not item.balancers],
            proxy_protocol_listen=[ListenSpec(item.host, item.port, item.network) for item in listeners
                                   if item.kind == "metadata" and item.balancers]),
            config.processes - 1, config.worker_restart_interval)
        workers.start()
        metrics.gauges["processes"] = lambda: config.processes
    # the cyclic GC walks every object it tracks, and a cached instance is a few hundred of them
    # (its answers): what exists at start is frozen (it lives as long as the server), and the young
    # generation holds 50,000 objects instead of 700, so a storm of new instances is not slowed
    # by collections (measured: a third of an instance's first crawl with 10,000 cached)
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    if ready is not None:
        ready(listeners)

    async def housekeeping() -> None:
        while True:
            await asyncio.sleep(0.5)
            if fast is not None:
                fast.drain()
            log.flush()
            if workers is not None:
                workers.check()
            table.sweep()

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
        while table.busy() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        table.close_all()
        for listener in listeners:
            if listener.server is not None:
                listener.server.release()
        chores.cancel()
        if fast is not None:
            fast.close()
        cache.stop_watching()
        executor.shutdown(wait=True)
        log.close()
        registry.close()
    return 0


def worker_main() -> int:
    """A worker process: settings from stdin, then serve until SIGTERM."""
    import pickle
    import sys

    config = pickle.loads(sys.stdin.buffer.read())
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s %(levelname)s %(name)s[{os.getpid()}]: %(message)s")
    try:
        return asyncio.run(serve(config))
    except KeyboardInterrupt:
        return 0
