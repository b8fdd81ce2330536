"""IMDSv2 session tokens: ``PUT /latest/api/token`` and their checks on every EC2 request.

A token is stateless: ``instance_id.expiry.nonce`` plus an HMAC-SHA256 over it with a key every
server sharing the registry agrees on, so any server accepts a token another one issued. A
token is bound to the instance that asked for it; another instance presenting it gets 401.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from typing import Callable, Optional

TOKEN_HEADER = "x-aws-ec2-metadata-token"
TTL_HEADER = "x-aws-ec2-metadata-token-ttl-seconds"
MAX_TTL = 21600


class TokenError(Exception):
    """Why a token request or a token was refused; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


MAX_REMEMBERED = 100_000


class TokenIssuer:
    def __init__(self, key: bytes, clock: Callable[[], float] = time.time):
        self.key = key
        self.clock = clock  # wall-clock seconds (tests pass their own)
        self.checked: dict[str, tuple[str, int]] = {}  # token whose MAC was valid -> (owner, expiry)

    def parse_ttl(self, raw: Optional[str]) -> int:
        if raw is None:
            raise TokenError(400, "missing X-aws-ec2-metadata-token-ttl-seconds header")
        raw = raw.strip()
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 5 or not 1 <= int(raw) <= MAX_TTL:
            raise TokenError(400, f"X-aws-ec2-metadata-token-ttl-seconds must be an integer from 1 to {MAX_TTL}"
                                  f", got {raw[:20]!r}")
        return int(raw)

    def issue(self, instance_id: str, ttl: int) -> str:
        payload = f"{instance_id}.{int(self.clock()) + ttl}.{os.urandom(6).hex()}".encode()
        return (base64.urlsafe_b64encode(payload).decode().rstrip("=") + "." + self._mac(payload))

    def check(self, token: str, instance_id: str) -> None:
        """Raise TokenError(401) unless ``token`` is valid, unexpired and ``instance_id``'s.

        A token whose MAC checked out once is remembered (owner, expiry), so an instance's
        following requests skip the HMAC; owner and expiry are still checked every time."""
        known = self.checked.get(token)
        if known is not None:
            if known[0] != instance_id:
                raise TokenError(401, "IMDSv2 token was issued to another instance")
            if known[1] < self.clock():
                raise TokenError(401, "IMDSv2 token has expired")
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
        owner, expiry, _nonce = parts
        if not expiry.isdigit():
            if owner != instance_id:
                raise TokenError(401, "IMDSv2 token was issued to another instance")
            raise TokenError(401, "IMDSv2 token has expired")
        if len(self.checked) >= MAX_REMEMBERED:
            self.checked.clear()
        self.checked[token] = (owner, int(expiry))
        if owner != instance_id:
            raise TokenError(401, "IMDSv2 token was issued to another instance")
        if int(expiry) < self.clock():
            raise TokenError(401, "IMDSv2 token has expired")

    def _mac(self, payload: bytes) -> str:
        return hmac.new(self.key, payload, hashlib.sha256).hexdigest()[:32]
