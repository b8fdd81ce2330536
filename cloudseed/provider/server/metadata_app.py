"""The metadata application: who is asking, then the OpenStack, EC2 or NoCloud answer for them.

Identity: a direct client is the instance holding its source address on the listener's network
(any network when the listener has none, refused when that is ambiguous). A configured proxy
names the instance with ``X-Instance-ID`` signed by ``X-Instance-ID-Signature`` (HMAC-SHA256
with the shared secret, checked in constant time) and, when it also sends ``X-Forwarded-For``
and ``X-Neutron-Network-ID``, they must match the instance. The same headers from anyone else
are ignored. Every route only ever reads the identified instance's own record.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from typing import Any, Awaitable, Optional, Union
from urllib.parse import parse_qsl

from cloudseed.provider.registry import Registry
from cloudseed.provider.registry.record import MAX_PASSWORD as MAX_PASSWORD_BYTES
from cloudseed.provider.server import signature_api
from cloudseed.provider.server.apis import ec2 as ec2_api
from cloudseed.provider.server.apis import nocloud as nocloud_api
from cloudseed.provider.server.apis import openstack as openstack_api
from cloudseed.provider.server.config import ServerConfig
from cloudseed.provider.server.credentials.cloud_credentials import CloudCredentials
from cloudseed.provider.server.engine.http import Request, Response, text_error
from cloudseed.provider.server.imds_tokens import EC2_CLOUD, TOKEN_HEADER, TTL_HEADER, TokenError, TokenIssuer
from cloudseed.provider.server.instance_cache import AMBIGUOUS, MISSING, CachedInstance, InstanceCache
from cloudseed.provider.server.rate_limit import RateLimiter
from cloudseed.provider.server.routes import (
    AKAMAI,
    CLOUD_APIS,
    EC2,
    NOCLOUD,
    NOCLOUD_PREFIX,
    OPENSTACK,
    OPENSTACK_PREFIX,
    PHONE_HOME,
    PROVISIONING,
    TOKEN,
    api_for,
)

Answer = Union[Response, Awaitable[Response]]
READ_METHODS = ("GET", "HEAD")
MAX_PHONE_HOME = 64 * 1024
OWN_TOKENS = frozenset((AKAMAI,))  # APIs whose own session tokens satisfy "tokens required"

_NOT_FOUND = text_error(404, "not found")
EC2_ERROR_IDLE_SECONDS = 1.0  # how long a connection stays open idle after an EC2 error answer
_NO_INSTANCE = text_error(404, "no instance is registered for this address")
_NO_HEADERS: dict[str, str] = {}  # a request C read: header lines without a token (fast_path.c verifies them)


class MetadataApp:
    def __init__(self, config: ServerConfig, registry: Registry, cache: InstanceCache, tokens: TokenIssuer,
                 limiter: RateLimiter, metrics: Any):
        self.config = config
        self.registry = registry
        self.cache = cache
        self.tokens = tokens
        self.limiter = limiter
        self.metrics = metrics
        self.proxy_secret = (config.proxy_shared_secret or "").encode()
        self._proxy_peers: dict[str, bool] = {}
        self._ec2_versions = ec2_api.versions_listing()
        self._os_versions = openstack_api.versions_listing()
        self._ec2_live = ec2_api.Live(registry)  # credentials and identity keys of this registry
        self._cloud_apis: dict[str, Any] = {}  # routes.CLOUD_APIS: their modules, imported when first asked
        self.credentials = CloudCredentials(registry, config.access_token_seconds,  # GCE, Azure, OCI keys
                                            config.azure_attested_key)
        self._userdata_signer: Any = None  # signature_api: the registry's user-data key, loaded when first used

    # -- entry point -----------------------------------------------------------------------
    def handle(self, request: Request) -> Answer:
        signed: Any = None
        if self.config.proxies and self._is_proxy(request.peer):
            proxied = True
            forwarded = request.headers.get("x-forwarded-for", "")
            request.client = forwarded.split(",")[-1].strip() or request.peer
            signed = self._signed_instance_id(request)  # the instance id, or a 403
        else:
            proxied = False
        if self.limiter.rate > 0:
            # one bucket per identified instance: its address on the listener's network, or the
            # proxy's signed instance id whatever the proxy forwards (or does not); requests whose
            # signature fails share the proxy's own bucket
            if not proxied:
                bucket: Any = (request.listener.network, request.peer)
            else:
                bucket = ("instance", signed) if signed.__class__ is str else ("proxy", request.peer)
            wait = self.limiter.retry_after(bucket)
            if wait is not None:
                self.metrics.rate_limited += 1
                return text_error(429, f"rate limit exceeded for {request.client}: at most "
                                       f"{self.limiter.rate:g} requests/s (bursts of {self.limiter.burst}); "
                                       f"retry after {wait}s", [("Retry-After", str(wait))])
        if proxied:
            instance = self._proxy_identity(request, signed)
        else:
            instance = self.cache.cached_by_address(request.listener.network, request.peer)
            if instance.__class__ is CachedInstance:  # the hot path: a known instance, a path seen before
                request.instance_id = instance.instance_id
                if (request.method == "GET" or request.method == "HEAD") and not request.query \
                        and not instance.faults:
                    answer = instance.routes.get(request.path)  # by path: a query may choose another API
                    if answer is not None:
                        refused = self._check_token(request, instance)
                        if refused is not None:
                            return refused
                        if answer.__class__ is not Response:
                            return answer()
                        fast = request.listener.fast
                        if fast is not None and not instance.events and TOKEN_HEADER not in request.headers:
                            fast.offer(request, instance, self.remembered)  # C may answer this peer's like
                        return answer
                answer = self._route(request, instance)
                if answer.__class__ is Response and request.listener.fast is not None:
                    self._offer(request, instance, answer)
                return answer
        if instance is MISSING:
            return self._identify_then_answer(request, proxied)
        return self._answer(request, instance)

    async def _identify_then_answer(self, request: Request, proxied: bool) -> Response:
        if proxied:
            instance = await self.cache.by_id(request.headers["x-instance-id"].strip())
            instance = self._check_proxy_claims(request, instance)
        else:
            instance = await self.cache.by_address(request.listener.network, request.peer)
        answer = self._answer(request, instance)
        if not isinstance(answer, Response):
            return await answer
        if not proxied and request.listener.fast is not None:
            self._offer(request, instance, answer)
        return answer

    def _offer(self, request: Request, instance: Any, answer: Response) -> None:
        """After Python routed a request on a direct connection (the first of an instance, or a
        path not in its routes yet): C may answer this peer from now on, as after the hot path's
        answer, when it is one the hot path would repeat: a plain GET or HEAD with no token of an
        instance without timeline or faults, answered from what its routes now keep for the path
        (so the token check passed)."""
        if instance.__class__ is CachedInstance and not instance.events and not instance.faults \
                and (request.method == "GET" or request.method == "HEAD") and not request.query \
                and instance.routes.get(request.path) is answer and TOKEN_HEADER not in request.headers:
            request.listener.fast.offer(request, instance, self.remembered)

    def remembered(self, instance: CachedInstance, path: str) -> Any:
        """The answer a plain ``GET path`` by ``instance`` gets (direct connection, no IMDSv2 token,
        no query) when routing it keeps that answer in the instance's routes, else None: what the C
        fast path calls for a registered peer's path not asked before (fast_path.c), so that an
        instance's first crawl is C's after its first request. Only the OpenStack and EC2 APIs,
        whose answers depend on the path and the record alone (never on a request's headers), for
        an instance without timeline or faults (C registers no other)."""
        if instance.events or instance.faults or path[1:2] == "/" or len(path) < 2 or path[-4:] == ".sig":
            return None
        api = api_for(path, instance.record.clouds)
        if api != OPENSTACK and api != EC2:
            return None
        self._routed(Request("GET", path, "HTTP/1.1", _NO_HEADERS, b"", "", None, path), instance)
        return instance.routes.get(path)

    def _answer(self, request: Request, instance: Any) -> Answer:
        if isinstance(instance, Response):
            return instance
        if instance is AMBIGUOUS:
            return text_error(403, f"address {request.client} belongs to instances on several networks; "
                                   "this listener must name its network (--listen HOST:PORT=NETWORK)")
        if instance is None:
            return _NO_INSTANCE
        request.instance_id = instance.record.instance_id
        return self._route(request, instance)

    # -- identity --------------------------------------------------------------------------
    def _is_proxy(self, peer: str) -> bool:
        if not self.config.proxies:
            return False
        known = self._proxy_peers.get(peer)
        if known is None:
            try:
                address = ipaddress.ip_address(peer)
                known = any(address in network for network in self.config.proxies)
            except ValueError:
                known = False
            if len(self._proxy_peers) < 100_000:
                self._proxy_peers[peer] = known
        return known

    def _signed_instance_id(self, request: Request) -> Union[str, Response]:
        """The proxy's ``X-Instance-ID`` when its signature checks out, else the 403 to answer."""
        instance_id = request.headers.get("x-instance-id", "").strip()
        signature = request.headers.get("x-instance-id-signature", "").strip()
        if not instance_id or not signature:
            return text_error(403, "proxied request without X-Instance-ID and X-Instance-ID-Signature")
        expected = hmac.new(self.proxy_secret, instance_id.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), signature.lower().encode()):
            return text_error(403, "X-Instance-ID-Signature does not match X-Instance-ID")
        return instance_id

    def _proxy_identity(self, request: Request, signed: Union[str, Response]) -> Any:
        if signed.__class__ is not str:
            return signed
        instance_id = str(signed)
        instance = self.cache.cached(instance_id)
        if instance is MISSING:
            return MISSING
        return self._check_proxy_claims(request, instance)

    def _check_proxy_claims(self, request: Request, instance: Optional[CachedInstance]) -> Any:
        if isinstance(instance, Response) or instance is None:
            return instance
        network = request.headers.get("x-neutron-network-id") or request.headers.get("x-network-id")
        forwarded = request.headers.get("x-forwarded-for")
        if forwarded and network:
            address = request.client
            if not any(a["address"] == address and a["network"] == network for a in instance.record.addresses):
                return text_error(403, f"instance {instance.record.instance_id} has no address {address} "
                                       f"on network {network}")
        return instance

    # -- routing ---------------------------------------------------------------------------
    def _route(self, request: Request, instance: CachedInstance) -> Answer:
        if instance.faults:  # the operator's rehearsal faults (faults.py) come first
            from cloudseed.provider.server import faults

            fault = faults.active(instance.faults, request.path)
            if fault is not None:
                return faults.answer(fault, lambda: self._routed(request, instance))
        return self._routed(request, instance)

    def _routed(self, request: Request, instance: CachedInstance) -> Answer:
        """Every API serves only ``instance``'s data, and only once its IMDSv2 rules are met."""
        path = request.path
        if path[1:2] == "/":  # "//latest/meta-data/...": read as one slash, as EC2's IMDS does; AWS's own
            path = "/" + path.lstrip("/")  # @aws-sdk/ec2-metadata-service asks so (endpoint "/" + "/latest/...")
        api = request.api = api_for(path, instance.record.clouds, request.query)  # the one place (metrics too)
        if api == TOKEN:
            return self._token(request, instance)
        refused = self._check_token(request, instance, api in OWN_TOKENS)
        if refused is not None:
            return refused
        if path[-4:] == ".sig" and signature_api.is_signature_path(path) and request.method in READ_METHODS:
            return signature_api.answer(self, request, instance, self._route)  # signed user-data, every API
        if api == OPENSTACK:
            return self._openstack(request, instance, path[len(OPENSTACK_PREFIX):])
        if api == NOCLOUD:
            return self._nocloud(request, instance, path[len(NOCLOUD_PREFIX):])
        if api == PHONE_HOME:
            return self._phone_home(request, instance, path[len("/phone-home"):])
        if api == PROVISIONING:  # the agent's reports of its own boot
            from cloudseed.provider.server import provisioning_api

            return provisioning_api.handle(self, request, instance)
        if api in CLOUD_APIS:
            module = self._cloud_apis.get(api)
            if module is None:
                import importlib

                module = self._cloud_apis[api] = importlib.import_module(f"cloudseed.provider.server.apis.{api}")
            return module.handle(self, request, instance)
        answer = self._ec2(request, instance, path)
        if answer.__class__ is Response and answer.status >= 400 and request.connection is not None:
            # EC2's IMDS closes every connection, and the AWS SDK for JavaScript's MetadataService never
            # reads an error's body: on a connection kept open its process would wait for our idle timeout
            request.connection.close_when_idle(EC2_ERROR_IDLE_SECONDS)
        return answer

    def _cached(self, request: Request, instance: CachedInstance, key: str, render: Any) -> Response:
        """The answer under ``key`` (rendered once); remembered for ``request.path`` too (``routes``)."""
        found = instance.responses.get(key)
        if found is None:
            found = render()
            if found is None:
                return _NOT_FOUND  # never kept: a flood of unknown paths costs no memory
            instance.remember(key, found)
        instance.route(request.path, found)
        return found if found.__class__ is Response else found()

    def _openstack(self, request: Request, instance: CachedInstance, rest: str) -> Answer:
        parts = [p for p in rest.split("/") if p]
        if rest and not rest.startswith("/"):
            return _NOT_FOUND
        if len(parts) > 2:
            return _NOT_FOUND
        if len(parts) == 2 and parts[1] == "password":
            return self._password(request, instance, parts[0])
        if request.method not in READ_METHODS:
            return _method_not_allowed("GET, HEAD")
        if not parts:
            instance.route(request.path, self._os_versions)
            return self._os_versions
        version = openstack_api.resolve_version(parts[0])
        if version is None:
            return _NOT_FOUND
        name = parts[1] if len(parts) == 2 else ""
        record = instance.record
        return self._cached(request, instance, f"os/{version}/{name}",
                            lambda: openstack_api.render(record, version, name))

    def _password(self, request: Request, instance: CachedInstance, version: str) -> Answer:
        resolved = openstack_api.resolve_version(version)
        if resolved is None or resolved < openstack_api.GRIZZLY:
            return _NOT_FOUND
        clouds = instance.record.clouds
        if "cloudstack" in clouds or "exoscale" in clouds:
            # this password is the password server's (password_server.py: DomU_Request, served
            # until acknowledged); never read, nor replaced, through the OpenStack API
            return text_error(404, "this instance's password is served by the password server only")
        if request.method in READ_METHODS:
            return Response(200, instance.record.password or "")
        if request.method != "POST":
            return _method_not_allowed("GET, HEAD, POST")
        if len(request.body) > MAX_PASSWORD_BYTES:
            return text_error(400, f"password is {len(request.body)} bytes, the limit is {MAX_PASSWORD_BYTES}")
        if not request.body:
            return text_error(400, "password: empty body")
        try:
            password = request.body.decode("utf-8")
        except UnicodeDecodeError:
            return text_error(400, "password: not UTF-8 text")
        if instance.record.password is not None:
            if _same(instance.record.password, password):  # this write again: its answer was lost (a 503)
                return Response(200, "")
            return text_error(409, "password already set; an operator must clear it first")
        return self._store_password(instance.record.instance_id, password)

    async def _store_password(self, instance_id: str, password: str) -> Response:
        stored = await self.cache.run(self.registry.set_password_once, instance_id, password)
        if not stored:
            current = await self.cache.run(self.registry.get, instance_id)
            if current is None or not _same(current.password, password):
                return text_error(409, "password already set; an operator must clear it first")
        self.cache.invalidate([instance_id])
        return Response(200, "")

    def _nocloud(self, request: Request, instance: CachedInstance, rest: str) -> Answer:
        if rest and not rest.startswith("/"):
            return _NOT_FOUND
        if request.method not in READ_METHODS:
            return _method_not_allowed("GET, HEAD")
        parts = [p for p in rest.split("/") if p]
        if len(parts) == 2 or (len(parts) == 1 and parts[0] not in nocloud_api.FILES):
            if parts[0] != instance.record.instance_id:
                return text_error(403, "this path belongs to another instance")
            parts = parts[1:]
        if len(parts) > 1:
            return _NOT_FOUND
        name = parts[0] if parts else ""
        record = instance.record
        return self._cached(request, instance, f"nc/{name}", lambda: nocloud_api.render(record, name))

    def _ec2(self, request: Request, instance: CachedInstance, path: str) -> Answer:
        parts = path.split("/", 2)  # "", version, rest
        version = parts[1] if len(parts) > 1 else ""
        resolved = ec2_api.resolve_version(version) if version else ""
        if resolved is None:
            return _NOT_FOUND
        if request.method not in READ_METHODS:
            return _method_not_allowed("GET, HEAD")
        if not version:  # not kept in routes: GCE's clients ask "/" too (google-auth's ping)
            from cloudseed.provider.server.apis import gce as gce_api

            if gce_api.flavored(request):
                return gce_api.ROOT
            return self._ec2_versions
        subpath = parts[2] if len(parts) > 2 else ""
        record = instance.record
        region = self.config.region
        if subpath[:9] == "meta-data" and not instance.events and ("answered", version) not in instance.trees:
            self._ec2_answers(instance, version, resolved)
        return self._cached(request, instance, f"ec2/{resolved}/" + "/".join(p for p in subpath.split("/") if p),
                            lambda: ec2_api.render(record, resolved, subpath, region, instance.trees,
                                                   self._ec2_live, instance.events))

    def _ec2_answers(self, instance: CachedInstance, version: str, resolved: str) -> None:
        """Every meta-data answer of ``version`` (as the client spells it) at once, routed by the
        paths a crawler asks (a directory with and without its slash): one walk of the tree
        instead of one lookup per request. Within the instance's bounds (``route_all``); not for
        an instance with a timeline, whose answers change."""
        instance.trees[("answered", version)] = True
        instance.route_all(ec2_api.meta_data_answers(instance.record, resolved, f"/{version}/meta-data",
                                                     self.config.region, instance.trees, self._ec2_live))

    def _check_token(self, request: Request, instance: CachedInstance, own_tokens: bool = False) -> Optional[Response]:
        """401 when tokens are required (by the instance or the server) and none is sent, or
        when the token sent is not a valid, unexpired EC2 token of this instance; on every API.
        An API with tokens of its own (``OWN_TOKENS``: Akamai's PUT-then-header protocol, which
        holds against SSRF as IMDSv2 does) needs no EC2 token, but one sent is still checked."""
        token = request.headers.get(TOKEN_HEADER)
        if token is None:
            if own_tokens:
                return None
            if instance.record.imds_tokens == "required" or self.config.imds_tokens == "required":
                return text_error(401, "IMDSv2 token required: PUT /latest/api/token first")
            return None
        try:
            self.tokens.check(token, instance.record.instance_id)
        except TokenError as error:
            return text_error(error.status, str(error))
        return None

    def _token(self, request: Request, instance: CachedInstance) -> Response:
        if request.method != "PUT":
            return _method_not_allowed("PUT")
        forwarded = request.headers.get("x-forwarded-for")
        if forwarded is not None and (request.client == request.peer or "," in forwarded):
            return text_error(403, "token requests carrying X-Forwarded-For are refused")
        try:
            ttl = self.tokens.parse_ttl(request.headers.get(TTL_HEADER))
        except TokenError as error:
            return text_error(error.status, str(error))
        token = self.tokens.issue(instance.record.instance_id, ttl)
        return Response(200, token, headers=[(EC2_CLOUD.names["ttl"], str(ttl))],
                        ip_ttl=instance.record.ec2.get("hop_limit") or self.config.token_hop_limit)

    def _phone_home(self, request: Request, instance: CachedInstance, rest: str) -> Answer:
        if request.method != "POST":
            return _method_not_allowed("POST")
        claimed_path = rest.strip("/")
        if claimed_path and claimed_path != instance.record.instance_id:
            return text_error(403, "this path belongs to another instance")
        if len(request.body) > MAX_PHONE_HOME:
            return text_error(413, f"phone_home body is {len(request.body)} bytes, the limit is {MAX_PHONE_HOME}")
        content_type = request.headers.get("content-type", "application/x-www-form-urlencoded")
        if "json" in content_type:
            import json

            try:
                fields = json.loads(request.body or b"{}")
            except ValueError as error:
                return text_error(400, f"phone_home body is not JSON: {error}")
            if not isinstance(fields, dict):
                return text_error(400, "phone_home body must be a JSON object")
        else:
            try:
                fields = dict(parse_qsl(request.body.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
            except UnicodeDecodeError:
                return text_error(400, "phone_home body is not UTF-8 form data")
        claimed = fields.get("instance_id")
        if claimed not in (None, "", "N/A") and claimed != instance.record.instance_id:
            return text_error(403, f"instance_id {claimed!r} is not the requesting instance")
        return self._store_phone_home(instance.record.instance_id, request.client, fields)

    async def _store_phone_home(self, instance_id: str, source: str, fields: dict) -> Response:
        await self.cache.run(self.registry.add_phone_home, instance_id, source, fields)
        return Response(200, "ok")


def _same(stored: Optional[str], sent: str) -> bool:
    """Whether a guest's password write repeats the one stored (a retry is not a conflict)."""
    return stored is not None and hmac.compare_digest(stored.encode(), sent.encode())


def _method_not_allowed(allow: str) -> Response:
    return text_error(405, f"method not allowed; use {allow}", [("Allow", allow)])

