"""Temporary credentials of an instance's IAM role (``iam/security-credentials/ROLE``) and of the
instance itself (``identity-credentials/ec2/security-credentials/ec2-instance``).

Nothing is stored: each set is derived from a key every server of the registry shares
(``shared_setting("ec2_credentials_key")``), the instance, the role and the rotation window, so
several server processes, or servers, hand out the same credentials at the same moment. As on
AWS, a new set appears every ``ROTATION`` seconds and each set stays valid ``LIFETIME`` seconds
from its ``LastUpdated``, so a client refreshing before ``Expiration`` always gets a newer set.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Callable

from cloudseed.provider.server.engine.http import Response

ROTATION = 3600  # a new set every hour
LIFETIME = 6 * 3600  # each set valid six hours after it appeared


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class CredentialIssuer:
    def __init__(self, key: bytes, clock: Callable[[], float] = time.time):
        self.key = key
        self.clock = clock

    def _mac(self, *parts: str) -> bytes:
        return hmac.new(self.key, "\0".join(parts).encode(), hashlib.sha256).digest()

    def credentials(self, instance_id: str, kind: str, name: str, window: int) -> dict:
        """The credential set of ``window`` (``int(time / ROTATION)``) for one instance and role."""
        base = (instance_id, kind, name, str(window))
        key_id = "ASIA" + base64.b32encode(self._mac("id", *base)).decode()[:16]
        secret = base64.b64encode(self._mac("secret", *base) + self._mac("secret2", *base)).decode()[:40]
        payload = json.dumps({"i": instance_id, "r": name, "w": window}, separators=(",", ":")).encode()
        token = base64.b64encode(payload + self._mac("token", *base) + self._mac("token2", *base) * 4).decode()
        started = window * ROTATION
        return {"Code": "Success", "LastUpdated": _iso(started), "Type": "AWS-HMAC", "AccessKeyId": key_id,
                "SecretAccessKey": secret, "Token": token, "Expiration": _iso(started + LIFETIME)}

    def leaf(self, instance_id: str, kind: str, name: str) -> Callable[[], Response]:
        """The live answer: the current window's set, rendered once per window."""
        cached: list = [None, None]  # window, Response

        def answer() -> Response:
            window = int(self.clock() // ROTATION)
            if cached[0] != window:
                doc = self.credentials(instance_id, kind, name, window)
                cached[0], cached[1] = window, Response(200, json.dumps(doc, indent=2))
            return cached[1]

        return answer

    def info_leaf(self, doc: dict) -> Callable[[], Response]:
        """``doc`` (an ``info`` document) with ``LastUpdated``: the current set's start."""
        cached: list = [None, None]

        def answer() -> Response:
            window = int(self.clock() // ROTATION)
            if cached[0] != window:
                shown = {"Code": doc.get("Code", "Success"), "LastUpdated": _iso(window * ROTATION), **doc}
                cached[0], cached[1] = window, Response(200, json.dumps(shown, indent=2))
            return cached[1]

        return answer
