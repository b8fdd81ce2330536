"""CloudStack's (and Exoscale's) password server: ``DomU_Request: send_my_password`` on its own port.

A listener of kind ``password`` (``--password-server-listen HOST:PORT[=NETWORK]``, usually port
8080 on the virtual router's address or 169.254.169.254). Any path; the request header
``DomU_Request`` says what is wanted, as the CloudStack virtual router's server answers it:
``send_my_password`` -> the instance's password (its record's ``password``) as text, or
``saved_password`` when there is none (any more); ``saved_password`` -> the guest has stored it:
the password is forgotten (``Registry.clear_password``), so it is served once, and the answer is
``saved_password``; anything else -> 400 ``bad_request``. Only instances whose record names
``clouds.cloudstack`` or ``clouds.exoscale`` are served (others: 404), identified by source
address like the metadata listeners (no proxies here). The password is never logged.
"""

from __future__ import annotations

from typing import Any

from cloudseed.provider.server.http import Request, Response, text_error
from cloudseed.provider.server.instance_cache import AMBIGUOUS, MISSING, CachedInstance

API = "password"
CLOUDS = ("cloudstack", "exoscale")
HEADER = "domu_request"
SAVED = "saved_password"
_HEADERS = [("Server", "cloudseed password server"), ("Cache-Control", "no-store")]


class PasswordServer:
    def __init__(self, registry: Any, cache: Any, limiter: Any, metrics: Any):
        self.registry = registry
        self.cache = cache
        self.limiter = limiter
        self.metrics = metrics

    def handle(self, request: Request) -> Any:
        request.api = API
        if request.method not in ("GET", "HEAD"):
            return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
        if self.limiter.rate > 0:
            wait = self.limiter.retry_after(("password", request.listener.network, request.peer))
            if wait is not None:
                self.metrics.rate_limited += 1
                return text_error(429, f"rate limit exceeded for {request.client}; retry after {wait}s",
                                  [("Retry-After", str(wait))])
        return self._answer(request)

    async def _answer(self, request: Request) -> Response:
        instance = self.cache.cached_by_address(request.listener.network, request.peer)
        if instance is MISSING:
            instance = await self.cache.by_address(request.listener.network, request.peer)
        if isinstance(instance, Response):
            return instance
        if instance is AMBIGUOUS:
            return text_error(403, f"address {request.client} belongs to instances on several networks; "
                                   "this listener must name its network (HOST:PORT=NETWORK)")
        if instance is None or not isinstance(instance, CachedInstance):
            return text_error(404, "no instance is registered for this address")
        record = instance.record
        request.instance_id = record.instance_id
        if not any(cloud in (record.clouds or {}) for cloud in CLOUDS):
            return text_error(404, f"instance {record.instance_id} has no password server "
                                   "(its record names neither clouds.cloudstack nor clouds.exoscale)")
        wanted = request.headers.get(HEADER, "").strip()
        if wanted == "send_my_password":
            # read fresh from the registry: another process may have served it meanwhile
            current = await self.cache.run(self.registry.get, record.instance_id)
            password = current.password if current is not None else None
            return Response(200, password if password else SAVED, headers=_HEADERS)
        if wanted == SAVED:
            if await self.cache.run(self.registry.clear_password, record.instance_id):
                self.cache.invalidate([record.instance_id])
            return Response(200, SAVED, headers=_HEADERS)
        return Response(400, "bad_request", headers=_HEADERS)
