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

Only a password the operator set is served (``record.password_by == "operator"``): a value a guest
posted through the OpenStack password API (before the record named CloudStack) is answered as
``saved_password``, so nothing a process in the guest wrote comes back as the password. The
OpenStack API refuses the password of a CloudStack/Exoscale record (``MetadataApp._password``).

IMDSv2 tokens: when the instance (``imds_tokens: required``) or the server requires them, a
request must carry a valid EC2 token of the instance in ``X-aws-ec2-metadata-token`` (got with
``PUT /latest/api/token`` from the metadata listener), else 401; a token sent is always checked.
CloudStack's own clients (cloud-init, the router's wget recipe) send none: give their instances
``imds_tokens: optional``.
"""

from __future__ import annotations

from typing import Any

from cloudseed.clouds.cloudstack import CLOUD
from cloudseed.provider.server.engine.http import Request, Response, text_error
from cloudseed.provider.server.imds_tokens import TOKEN_HEADER, TokenError
from cloudseed.provider.server.instance_cache import AMBIGUOUS, MISSING, CachedInstance

API = "password"
CLOUDS = ("cloudstack", "exoscale")
HEADER = CLOUD.names["password_header"].lower()  # the wire contract: clouds/cloudstack.py
SAVED, SEND = CLOUD.names["saved_password"], CLOUD.names["send_password"]
_HEADERS = [("Server", "cloudseed password server"), ("Cache-Control", "no-store")]


class PasswordServer:
    def __init__(self, registry: Any, cache: Any, limiter: Any, metrics: Any, tokens: Any,
                 imds_tokens: str = "optional"):
        self.registry = registry
        self.cache = cache
        self.limiter = limiter
        self.metrics = metrics
        self.tokens = tokens
        self.imds_tokens = imds_tokens  # the server's setting: "required" holds here too

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
        token = request.headers.get(TOKEN_HEADER)
        if token is None:
            if record.imds_tokens == "required" or self.imds_tokens == "required":
                return text_error(401, "IMDSv2 token required: PUT /latest/api/token on the metadata service, "
                                       "then send it as X-aws-ec2-metadata-token")
        else:
            try:
                self.tokens.check(token, record.instance_id)
            except TokenError as error:
                return text_error(error.status, str(error))
        wanted = request.headers.get(HEADER, "").strip()
        if wanted == SEND:
            # read fresh from the registry: another process may have served it meanwhile
            current = await self.cache.run(self.registry.get, record.instance_id)
            password = current.password if current is not None and current.password_by == "operator" else None
            return Response(200, password if password else SAVED, headers=_HEADERS)
        if wanted == SAVED:
            if await self.cache.run(self.registry.clear_password, record.instance_id):
                self.cache.invalidate([record.instance_id])
            return Response(200, SAVED, headers=_HEADERS)
        return Response(400, "bad_request", headers=_HEADERS)
