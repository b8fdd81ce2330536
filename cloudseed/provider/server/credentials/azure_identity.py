"""Azure managed identities: ``/metadata/identity/oauth2/token`` and the identities of an instance.

A VM has a system-assigned identity unless its record says ``clouds.azure.system_identity: false``,
and the user-assigned identities of ``clouds.azure.user_identities`` (ids derived from their names
unless given). A request picks one with ``client_id``, ``object_id`` or ``msi_res_id`` (or
``mi_res_id``); without one, the system-assigned identity answers, or the only user-assigned one.
The answers, errors included, are IMDS's: 400 ``invalid_request`` "Identity not found" for an
identity the VM does not have, "Required query variable 'resource' is missing", 400
``bad_request_102`` without ``Metadata: true``, and so on.

Tokens are RS256 JWTs (``aud`` the resource, ``oid``/``sub`` the identity's object id, ``appid`` its
client id, ``xms_mirid`` its resource id, ``tid`` the tenant), signed with the registry's
credential key (``credential_keys.py``, published on the admin listener). A new one is made every
rotation and each is valid ``access_token_seconds``; made tokens are kept (bounded) for their window.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Callable, Union

from cloudseed.provider.instance_data import azure
from cloudseed.provider.server.credentials.gce_credentials import rotation_for
from cloudseed.provider.server.engine.http import Response

JSON = "application/json; charset=utf-8"
MAX_KEPT = 4096
MAX_RESOURCE = 1024
SELECTORS = ("client_id", "object_id", "msi_res_id", "mi_res_id")


def oauth_error(status: int, error: str, description: str) -> Response:
    return Response(status, json.dumps({"error": error, "error_description": description}), JSON)


NO_METADATA = oauth_error(400, "bad_request_102", "Required metadata header not specified")
NOT_FOUND = oauth_error(400, "invalid_request", "Identity not found")


def tenant_id(record: Any) -> str:
    return str(uuid.uuid5(azure.NAMESPACE, "tenant/" + azure.compute(record)["subscriptionId"]))


def identities(record: Any) -> list[dict[str, str]]:
    """``[{kind, client_id, object_id, resource_id}]``: the system-assigned identity first (if any)."""
    settings = azure.settings(record)
    compute = azure.compute(record)
    found = []
    if settings.get("system_identity", True):
        found.append({"kind": "system", "resource_id": compute["resourceId"],
                      "client_id": str(uuid.uuid5(azure.NAMESPACE, "msi-client/" + record.instance_id)),
                      "object_id": str(uuid.uuid5(azure.NAMESPACE, "msi-object/" + record.instance_id))})
    group = f"/subscriptions/{compute['subscriptionId']}/resourcegroups/{compute['resourceGroupName']}"
    for entry in settings.get("user_identities") or []:
        resource = entry.get("resource_id") or \
            f"{group}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{entry['name']}"
        derived = {f: str(uuid.uuid5(azure.NAMESPACE, f"uami-{f}/{resource}")) for f in ("client_id", "object_id")}
        found.append({"kind": "user", "resource_id": resource, "client_id": entry.get("client_id") or derived[
            "client_id"], "object_id": entry.get("object_id") or derived["object_id"]})
    return found


def select(record: Any, query: dict[str, str]) -> Union[dict[str, str], Response]:
    """The identity the query asks for, or the error answer."""
    given = [(name, query[name]) for name in SELECTORS if query.get(name)]
    if len(given) > 1:
        return oauth_error(400, "invalid_request", "Only one of client_id, object_id and msi_res_id may be given")
    known = identities(record)
    if not given:
        system = [i for i in known if i["kind"] == "system"]
        if system:
            return system[0]
        if len(known) == 1:
            return known[0]
        if known:
            return oauth_error(400, "invalid_request", "Multiple user assigned identities exist, please specify the "
                                                       "clientId / resourceId of the identity in the token request")
        return NOT_FOUND
    name, value = given[0]
    field = {"client_id": "client_id", "object_id": "object_id"}.get(name, "resource_id")
    for identity in known:
        if identity[field].lower() == value.lower():
            return identity
    return NOT_FOUND


class AzureTokens:
    def __init__(self, key: Any, lifetime: int = 3600, clock: Callable[[], float] = time.time):
        self.key = key
        self.lifetime = lifetime
        self.rotation = rotation_for(lifetime)
        self.clock = clock
        self._kept: dict[tuple, str] = {}

    def answer(self, record: Any, query: dict[str, str]) -> Response:
        resource = query.get("resource", "")
        if not resource:
            return oauth_error(400, "invalid_request", "Required query variable 'resource' is missing")
        if len(resource) > MAX_RESOURCE or not resource.isprintable():
            return oauth_error(400, "invalid_resource", f"AADSTS50001: The resource {resource[:100]!r} is not valid")
        identity = select(record, query)
        if isinstance(identity, Response):
            return identity
        now = self.clock()
        window = int(now // self.rotation)
        issued = window * self.rotation
        expires = issued + self.lifetime
        kept_key = (record.instance_id, identity["object_id"], resource, window)
        token = self._kept.get(kept_key)
        if token is None:
            tenant = tenant_id(record)
            claims = {"aud": resource, "iss": f"https://sts.windows.net/{tenant}/", "iat": issued, "nbf": issued,
                      "exp": expires, "appid": identity["client_id"], "appidacr": "2",
                      "idp": f"https://sts.windows.net/{tenant}/", "oid": identity["object_id"],
                      "sub": identity["object_id"], "tid": tenant, "ver": "1.0",
                      "xms_mirid": identity["resource_id"],
                      "uti": uuid.uuid5(azure.NAMESPACE, f"uti/{kept_key}").hex[:22]}
            token = self.key.sign_jwt(claims)
            if len(self._kept) >= MAX_KEPT:
                self._kept.clear()
            self._kept[kept_key] = token
        left = str(max(1, int(expires - now)))
        return Response(200, json.dumps({
            "access_token": token, "client_id": identity["client_id"], "expires_in": left,
            "expires_on": str(expires), "ext_expires_in": left, "not_before": str(issued),
            "resource": resource, "token_type": "Bearer"}), JSON)
