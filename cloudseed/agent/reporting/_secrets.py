"""The secret values an event must never carry, and their removal from event text.

Collected from the merged config (every string under a key that names a secret: password,
passwd, secret, token, private key...; all of ``chpasswd``; the password half of its
``user:password`` lines) and from the datasource's sensitive metadata (``add_values``). Each is
replaced by ``REDACTED`` wherever it appears in an event's name or description, longest first.
Values shorter than ``MIN_LENGTH`` are left alone (replacing "no" everywhere would say nothing
and garble everything).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

REDACTED = "REDACTED"
MIN_LENGTH = 4
SECRET_WORDS = ("pass", "secret", "token", "private", "credential", "hashed", "_key", "key_", "apikey", "api_key",
                "activation", "registration")
NOT_SECRET = frozenset(("true", "false", "none", "null", "random", "yes", "no"))
WHOLE_SECRET = ("chpasswd", "password", "random_seed", "ubuntu_pro", "ubuntu_advantage", "rh_subscription")


def _secret_key(key: Any) -> bool:
    text = str(key).lower()
    return any(word in text for word in SECRET_WORDS) or text in WHOLE_SECRET


class Secrets:
    def __init__(self) -> None:
        self.values: set[str] = set()
        self._ordered: list[str] = []

    def add_config(self, cfg: Any) -> None:
        found: set[str] = set()
        _walk(cfg, False, found)
        chpasswd = cfg.get("chpasswd") if isinstance(cfg, dict) else None
        if isinstance(chpasswd, dict):
            lines = chpasswd.get("list")
            if isinstance(lines, str):
                lines = lines.splitlines()
            for line in lines if isinstance(lines, list) else []:
                if isinstance(line, str) and ":" in line:
                    found.add(line.split(":", 1)[1])
        self.add_values(found)

    def add_values(self, values: Any) -> None:
        found: set[str] = set()
        _walk(values, True, found)
        new = {v for v in found if len(v) >= MIN_LENGTH and v.lower() not in NOT_SECRET} - self.values
        if new:
            self.values |= new
            for value in list(new):
                self.values.update(line.strip() for line in value.splitlines() if len(line.strip()) >= 8)
            self._ordered = sorted(self.values, key=len, reverse=True)

    def redact(self, text: str) -> str:
        if not text or not self._ordered:
            return text
        for value in self._ordered:
            if value in text:
                text = text.replace(value, REDACTED)
        return text


def _walk(node: Any, secret: bool, found: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _walk(value, secret or _secret_key(key), found)
    elif isinstance(node, (list, tuple, set)):
        for value in node:
            _walk(value, secret, found)
    elif secret and isinstance(node, str):
        found.add(node)
    elif secret and isinstance(node, (int, float)) and not isinstance(node, bool) and len(str(node)) >= 6:
        found.add(str(node))
