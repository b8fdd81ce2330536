"""GCE service-account credentials: OAuth2 access tokens (``.../service-accounts/ACCOUNT/token``) and
identity tokens (``.../service-accounts/ACCOUNT/identity?audience=...``).

Access tokens are opaque to the guest, as Google's: ``ya29.c.`` then a payload (instance, account,
scopes, window) and an HMAC-SHA256 of it under a key every server of the registry shares
(``shared_setting("gce_token_key")``). Nothing is stored: a new token appears every ``rotation``
seconds and each is valid ``lifetime`` seconds from then (server setting
``access_token_seconds``, default 3600), so the token answered keeps its ``expires_in`` counting
down and a client refreshing before it ends gets a newer one, as from GCE's metadata server. The
admin listener's ``/v1/credentials/gce/tokeninfo`` checks a token (a resource server's view).

Identity tokens are RS256 JWTs signed with the registry's credential key (``credential_keys.py``),
``iss`` ``https://accounts.google.com``, ``aud`` the query's audience, valid one hour;
``format=full`` adds the ``google.compute_engine`` claims and ``licenses=TRUE`` their
``license_id``. A signed token is kept (bounded) for a minute per account, audience and format.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import hmac
import json
import time
from typing import Any, Callable, Optional

from cloudseed.provider.instance_data import gce

ISSUER = "https://accounts.google.com"
IDENTITY_LIFETIME = 3600
MAX_KEPT = 4096  # signed identity tokens kept (all instances); more: start over


def rotation_for(lifetime: int) -> int:
    """Seconds between new tokens: the lifetime less five minutes (a quarter for short lifetimes)."""
    return max(1, lifetime - min(300, lifetime // 4))


class GceCredentials:
    def __init__(self, key: bytes, lifetime: int = 3600, clock: Callable[[], float] = time.time):
        self.key = key
        self.lifetime = lifetime
        self.rotation = rotation_for(lifetime)
        self.clock = clock
        self._identity: dict[tuple, str] = {}

    def _mac(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self.key, payload, hashlib.sha256).digest()).rstrip(b"=").decode()

    def access_token(self, instance_id: str, email: str, scopes: list[str]) -> dict[str, Any]:
        """The answer to ``.../token``: ``access_token``, ``expires_in``, ``token_type``."""
        now = self.clock()
        window = int(now // self.rotation)
        payload = json.dumps({"i": instance_id, "e": email, "s": sorted(scopes), "w": window},
                             separators=(",", ":")).encode()
        token = "ya29.c." + base64.urlsafe_b64encode(payload).rstrip(b"=").decode() + "." + self._mac(payload)
        expires = window * self.rotation + self.lifetime
        return {"access_token": token, "expires_in": max(1, int(expires - now)), "token_type": "Bearer"}

    def token_info(self, token: str) -> Optional[dict[str, Any]]:
        """What the token grants (Google's tokeninfo fields), or None when it is not one of ours or expired."""
        if not token.startswith("ya29.c.") or token.count(".") != 3:
            return None
        body, mac = token[len("ya29.c."):].rsplit(".", 1)
        try:
            payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            claims = json.loads(payload)
        except ValueError:
            return None
        if not isinstance(claims, dict) or not hmac.compare_digest(self._mac(payload), mac):
            return None
        expires = int(claims["w"]) * self.rotation + self.lifetime
        left = int(expires - self.clock())
        if left <= 0:
            return None
        azp = gce.unique_id(claims["e"])
        return {"azp": azp, "aud": azp, "sub": azp, "scope": " ".join(claims["s"]), "exp": str(expires),
                "expires_in": str(left), "email": claims["e"], "email_verified": "true", "access_type": "online",
                "instance_id": claims["i"]}

    def identity_token(self, signer: Any, record: Any, email: str, audience: str, full: bool,
                       licenses: bool) -> str:
        """A signed identity token for ``email`` of ``record`` (kept up to a minute)."""
        now = int(self.clock())
        minute = now // 60
        kept_key = (record.instance_id, email, audience, full, licenses, minute)
        found = self._identity.get(kept_key)
        if found is not None:
            return found
        issued = minute * 60
        subject = gce.unique_id(email)
        claims: dict[str, Any] = {"aud": audience, "azp": subject, "email": email, "email_verified": True,
                                  "exp": issued + IDENTITY_LIFETIME, "iat": issued, "iss": ISSUER, "sub": subject}
        if full:
            engine: dict[str, Any] = {
                "instance_creation_timestamp": _epoch(record.created_at),
                "instance_id": str(gce.tree(record)["instance"]["id"]),
                "instance_name": record.name or record.hostname.split(".")[0],
                "project_id": gce.project_id(record),
                "project_number": gce.project_number(record),
                "zone": record.availability_zone,
            }
            if licenses:
                engine["license_id"] = [str(x) for x in record.clouds.get("gce", {}).get("licenses") or []]
            claims["google"] = {"compute_engine": engine}
        token = signer.sign_jwt(claims)
        if len(self._identity) >= MAX_KEPT:
            self._identity.clear()
        self._identity[kept_key] = token
        return token


def _epoch(created_at: str) -> int:
    try:
        return calendar.timegm(time.strptime(created_at, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return 0
