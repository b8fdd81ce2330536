"""Session tokens: IMDSv2's ``PUT /latest/api/token`` (and Akamai's ``PUT /v1/token``) and their checks.

A token is stateless: ``scope/instance_id.expiry.nonce`` plus an HMAC-SHA256 over it with a key
every server sharing the registry agrees on, so any server accepts a token another one issued.
A token is bound to the instance that asked for it (another instance presenting it gets 401)
and to its **scope**, the API that issued it (``ec2``, ``akamai``): a token is accepted only by
the API of its scope, so a long-lived token of one API never opens another API's paths.

**Trading.** A token issued to a request that itself presented a token (Akamai's ``PUT
/v1/token`` with an EC2 token when the instance requires IMDSv2 tokens, or any credential an API
hands out against a token) must not outlive the token presented: ``issue(..., not_after=
expiry_of(presented))``. So no token outlives the cap of the API that issued the credential it
was traded for (a 5-second EC2 token never becomes a 12-hour Akamai one).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from typing import Callable, Optional

from cloudseed.clouds.ec2 import CLOUD as EC2_CLOUD

TOKEN_HEADER = EC2_CLOUD.names["token"].lower()  # request headers arrive lower-cased
TTL_HEADER = EC2_CLOUD.names["ttl"].lower()
MAX_TTL = 21600


class TokenError(Exception):
    """Why a token request or a token was refused; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


MAX_REMEMBERED = 20_000  # checked tokens remembered (about 200 bytes each); more: start over
EC2 = "ec2"


class TokenIssuer:
    def __init__(self, key: bytes, clock: Callable[[], float] = time.time):
        self.key = key
        self.clock = clock  # wall-clock seconds (tests pass their own)
        self.checked: dict[str, tuple[str, int, str]] = {}  # token whose MAC was valid -> (owner, expiry, scope)

    def parse_ttl(self, raw: Optional[str]) -> int:
        if raw is None:
            raise TokenError(400, f"missing {EC2_CLOUD.names['ttl']} header")
        raw = raw.strip()
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 5 or not 1 <= int(raw) <= MAX_TTL:
            raise TokenError(400, f"{EC2_CLOUD.names['ttl']} must be an integer from 1 to {MAX_TTL}"
                                  f", got {raw[:20]!r}")
        return int(raw)

    def issue(self, instance_id: str, ttl: int, scope: str = EC2, not_after: Optional[int] = None) -> str:
        """A token of ``scope`` for ``instance_id``, valid ``ttl`` seconds but never past
        ``not_after`` (the expiry of a token it was traded for)."""
        expiry = int(self.clock()) + ttl
        if not_after is not None:
            expiry = min(expiry, not_after)
        payload = f"{scope}/{instance_id}.{expiry}.{os.urandom(6).hex()}".encode()
        return (base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + self._mac(payload))

    def expiry_of(self, token: str) -> Optional[int]:
        """When ``token`` expires (epoch seconds), if it was checked before; else None."""
        known = self.checked.get(token)
        return known[1] if known is not None else None

    def check(self, token: str, instance_id: str, scope: str = EC2) -> None:
        """Raise TokenError(401) unless ``token`` is valid, unexpired, ``instance_id``'s and of ``scope``.

        A token whose MAC checked out once is remembered (owner, expiry, scope), so an
        instance's following requests skip the HMAC; all three are still checked every time."""
        known = self.checked.get(token)
        if known is not None:
            self._judge(known, instance_id, scope)
            return
        encoded, _, mac = token.strip().rpartition(".")
        try:
            payload = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except ValueError:
            raise TokenError(401, "invalid IMDSv2 token")
        # one spelling per token: no non-ASCII MAC (compare_digest would raise), no second base64
        # spelling of the same payload (unused low bits of the last character)
        if not encoded or not mac.isascii() or not hmac.compare_digest(self._mac(payload), mac) \
                or base64.urlsafe_b64encode(payload).decode().rstrip("=") != encoded:
            raise TokenError(401, "invalid IMDSv2 token")
        parts = payload.decode("utf-8", "replace").rsplit(".", 2)
        if len(parts) != 3:
            raise TokenError(401, "invalid IMDSv2 token")
        scoped, expiry, _nonce = parts
        token_scope, slash, owner = scoped.partition("/")
        if not slash or not expiry.isdigit():  # a token of an older release (no scope): not honoured
            raise TokenError(401, "invalid IMDSv2 token")
        if len(self.checked) >= MAX_REMEMBERED:
            self.checked.clear()
        known = self.checked[token] = (owner, int(expiry), token_scope)
        self._judge(known, instance_id, scope)

    def _judge(self, known: tuple[str, int, str], instance_id: str, scope: str) -> None:
        if known[2] != scope:
            raise TokenError(401, f"this token was issued by another API ({known[2]}), not {scope}")
        if known[0] != instance_id:
            raise TokenError(401, "IMDSv2 token was issued to another instance")
        if known[1] < self.clock():
            raise TokenError(401, "IMDSv2 token has expired")

    def _mac(self, payload: bytes) -> str:
        return hmac.new(self.key, payload, hashlib.sha256).hexdigest()[:32]
