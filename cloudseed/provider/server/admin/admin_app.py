"""The admin listener: ``/v1/instances`` REST API (bearer token; an instance's timeline at
``/v1/instances/ID/events``, ``admin_events.py``; what its agent reported at
``/v1/instances/ID/provisioning`` and ``/v1/provisioning``, ``admin_provisioning.py``), the fleet
pages (``/fleet``, ``fleet_page.py``), ``/openapi.json``, ``/metrics``, ``/health``, and the public
credential keys (``/v1/keys/...``, ``credential_keys_api.py``).

Errors are JSON ``{"error": "...", "field": "..."}``: 400 for invalid input naming the field,
401 without the right token, 404 for unknown instances, 409 for conflicts (id or address taken),
413 when the body exceeds ``max_admin_body``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from typing import Any, Optional
from urllib.parse import parse_qsl

from cloudseed.provider.registry import LIST_FILTERS, InstanceRecord, RecordError, Registry, RegistryError
from cloudseed.provider.server.admin.openapi import openapi_document
from cloudseed.provider.server.engine.http import Request, Response
from cloudseed.provider.server.instance_cache import InstanceCache
from cloudseed.provider.server.metrics import Metrics

JSON = "application/json"
MAX_LIST = 1000
MAX_PAGING_DIGITS = 15  # limit/offset: SQL integers are 64-bit; nobody pages that far
# /health (a balancer's check) answers within about a second: unhealthy when the change-log
# watcher has not reached the registry for this long, or (unless the registry thread's reads
# succeeded within HEALTH_WAIT) the registry does not answer a read in time
HEALTH_CONTACT_AGE = 3.0
HEALTH_WAIT = 1.0


def json_response(status: int, value: Any) -> Response:
    return Response(status, json.dumps(value, indent=1) + "\n", JSON)


def json_error(status: int, message: str, field: Optional[str] = None,
               headers: Optional[list[tuple[str, str]]] = None) -> Response:
    body: dict[str, Any] = {"error": message}
    if field:
        body["field"] = field
    return Response(status, json.dumps(body) + "\n", JSON, headers)


class AdminApp:
    def __init__(self, registry: Registry, cache: InstanceCache, metrics: Metrics, token: Optional[str],
                 credentials: Any = None):
        self.credentials = credentials  # cloud_credentials.CloudCredentials: public keys, tokeninfo
        self.registry = registry
        self.cache = cache
        self.metrics = metrics
        self.token = token
        self.started = time.time()
        self._openapi = json_response(200, openapi_document())

    async def handle(self, request: Request) -> Response:
        path = request.path.rstrip("/") or "/"
        if path == "/health":
            return await self._health(request)
        if path == "/metrics":
            if request.method not in ("GET", "HEAD"):
                return _not_allowed("GET, HEAD")
            return Response(200, self.metrics.render(), "text/plain; version=0.0.4")
        if path == "/openapi.json":
            return self._openapi if request.method in ("GET", "HEAD") else _not_allowed("GET, HEAD")
        if self.credentials is not None and path.startswith(("/v1/keys/", "/v1/credentials/")):
            from cloudseed.provider.server.credentials import credential_keys_api

            public = credential_keys_api.handle(self.credentials, request.method, path, request.query)
            if public is not None:
                return public
        if path == "/fleet" or path.startswith("/fleet/"):  # the fleet pages (fleet_page.py)
            from cloudseed.provider.server.admin import admin_provisioning

            return await admin_provisioning.fleet_route(self, request, path)
        if path == "/v1/provisioning":
            from cloudseed.provider.server.admin import admin_provisioning

            refused = self._authorise(request)
            return refused or await admin_provisioning.fleet_list(self, request)
        if path != "/v1/instances" and not path.startswith("/v1/instances/"):
            return json_error(404, f"no such endpoint {request.path}")
        refused = self._authorise(request)
        if refused is not None:
            return refused
        try:
            return await self._instances(request, path)
        except RecordError as error:
            return json_error(400, error.message, error.field)
        except RegistryError as error:  # 503 when the database is away: try again
            retry = getattr(error, "retry_after", None)
            return json_error(error.status, str(error), error.field,
                              [("Retry-After", str(retry))] if retry is not None else None)

    def reads_allowed(self, request: Request) -> bool:
        """Whether ``request`` may read: the bearer token, or the fleet pages' session cookie."""
        return self._authorise(request) is None

    def _authorise(self, request: Request) -> Optional[Response]:
        if not self.token:
            return json_error(503, "admin API disabled: configure admin_token (or CLOUDSEED_ADMIN_TOKEN)")
        if "cookie" in request.headers:
            from cloudseed.provider.server.admin.fleet_page import session_ok

            if session_ok(request, self.token):  # a browser signed in at /fleet/login: reads only
                return None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return json_error(401, "missing or wrong bearer token", "Authorization",
                              [("WWW-Authenticate", 'Bearer realm="cloudseed"')])
        return None

    async def _health(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return _not_allowed("GET, HEAD")
        age = self.cache.contact_age()
        if age > HEALTH_CONTACT_AGE:  # the watcher has not reached the registry lately: do not wait for it
            return json_error(503, f"registry unreachable: no answer for {age:.1f}s")
        if self.cache.answered_within(HEALTH_WAIT):
            # the registry thread's reads are succeeding (a storm of new instances queues thousands):
            # a read of our own would wait behind them past the balancer's check timeout and take a
            # server that is busy, not cut off, out of the healthy set
            return self._healthy()
        try:
            await asyncio.wait_for(self.cache.run(self.registry.changes_since, -1), HEALTH_WAIT)
        except asyncio.TimeoutError:
            return json_error(503, f"registry unreachable: no answer within {HEALTH_WAIT:g}s")
        except Exception as error:
            return json_error(503, f"registry unreachable: {error}")
        return self._healthy()

    def _healthy(self) -> Response:
        return json_response(200, {"status": "ok", "uptime_seconds": round(time.time() - self.started, 1),
                                   "cached_instances": len(self.cache.instances)})

    async def _instances(self, request: Request, path: str) -> Response:
        parts = path.split("/")[3:]  # after /v1/instances
        method = request.method
        if not parts:
            if method in ("GET", "HEAD"):
                return await self._list(request)
            if method == "POST":
                record = InstanceRecord.from_dict(self._body(request))
                await self.cache.run(self.registry.add, record)
                self.cache.invalidate([record.instance_id])
                return json_response(201, record.to_dict())
            return _not_allowed("GET, HEAD, POST")
        instance_id = parts[0]
        if len(parts) == 1:
            if method in ("GET", "HEAD"):
                record = await self.cache.run(self.registry.get, instance_id)
                if record is None:
                    return json_error(404, f"no instance {instance_id}", "instance_id")
                return json_response(200, record.to_dict())
            if method == "PATCH":
                changes = self._body(request)
                record = await self.cache.run(lambda: self.registry.update(instance_id, **changes))
                self.cache.invalidate([instance_id])
                return json_response(200, record.to_dict())
            if method == "DELETE":
                if not await self.cache.run(self.registry.delete, instance_id):
                    return json_error(404, f"no instance {instance_id}", "instance_id")
                self.cache.invalidate([instance_id])
                return Response(204, b"", JSON)
            return _not_allowed("GET, HEAD, PATCH, DELETE")
        if len(parts) == 2 and parts[1] == "password":
            if method != "DELETE":
                return _not_allowed("DELETE")
            if not await self.cache.run(self.registry.clear_password, instance_id):
                return json_error(404, f"no instance {instance_id}", "instance_id")
            self.cache.invalidate([instance_id])
            return Response(204, b"", JSON)
        if len(parts) >= 2 and parts[1] == "events":  # the instance's timeline (admin_events.py)
            from cloudseed.provider.server.admin import admin_events

            return await admin_events.handle(self, request, instance_id, parts[2:], lambda: self._body(request))
        if len(parts) >= 2 and parts[1] == "provisioning":  # the agent's reports (admin_provisioning.py)
            from cloudseed.provider.server.admin import admin_provisioning

            return await admin_provisioning.handle_instance(self, request, instance_id, parts[2:])
        if len(parts) == 2 and parts[1] == "phone-home":
            if method not in ("GET", "HEAD"):
                return _not_allowed("GET, HEAD")
            if await self.cache.run(self.registry.get, instance_id) is None:
                return json_error(404, f"no instance {instance_id}", "instance_id")
            return json_response(200, await self.cache.run(self.registry.phone_home, instance_id))
        return json_error(404, f"no such endpoint {request.path}")

    async def _list(self, request: Request) -> Response:
        filters: dict[str, Any] = {}
        limit, offset = 100, 0
        for key, value in parse_qsl(request.query, keep_blank_values=True):
            if key in ("limit", "offset"):
                if not (value.isascii() and value.isdigit()) or len(value) > MAX_PAGING_DIGITS:
                    return json_error(400, f"{key} must be a non-negative integer below "
                                           f"10^{MAX_PAGING_DIGITS}", key)
                if key == "limit":
                    limit = min(int(value), MAX_LIST)
                else:
                    offset = int(value)
            elif key in LIST_FILTERS:
                filters[key] = value
            else:
                return json_error(400, f"unknown filter (known: {', '.join(LIST_FILTERS)}, limit, offset)", key)
        records = await self.cache.run(lambda: self.registry.list(limit=limit, offset=offset, **filters))
        return json_response(200, {"instances": [r.to_dict() for r in records], "limit": limit, "offset": offset})

    @staticmethod
    def _body(request: Request) -> Any:
        content_type = request.headers.get("content-type", JSON)
        if "json" not in content_type:
            raise RecordError("Content-Type", f"must be application/json, got {content_type!r}")
        try:
            body = json.loads(request.body)
        except (ValueError, UnicodeDecodeError) as error:
            raise RecordError("(body)", f"is not valid JSON: {error}")
        if not isinstance(body, dict):
            raise RecordError("(body)", f"must be a JSON object, got {type(body).__name__}")
        return body


def _not_allowed(allow: str) -> Response:
    return json_error(405, f"method not allowed; use {allow}", headers=[("Allow", allow)])
