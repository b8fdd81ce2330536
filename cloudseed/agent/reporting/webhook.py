"""``type: webhook``: each event POSTed as JSON to ``endpoint``, from a background thread.

Settings (cloud-init's): ``endpoint`` (http or https URL), ``timeout`` (seconds per request,
default 5), ``retries`` (extra attempts per event, default 0, at most 10), and OAuth 1.0
PLAINTEXT credentials for MAAS (``consumer_key``, ``token_key``, ``token_secret``,
``consumer_secret``); cloudseed's addition: ``headers`` (a mapping of header names to values,
e.g. ``Authorization``). One event per request, as cloud-init sends them. The boot never waits
for the endpoint (``_sender.py``); three failed events in a row and it is left alone.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KNOWN = ("endpoint", "timeout", "retries", "headers", "consumer_key", "token_key", "token_secret", "consumer_secret")
MAX_RETRIES = 10
MAX_TIMEOUT = 60.0


def check_common(options: dict, context: Any, kind: str, known: tuple) -> tuple[str, float, int, dict]:
    """(endpoint, timeout, retries, headers) of a network handler's settings; ReportingError naming the key."""
    from cloudseed.agent.reporting import ReportingError

    where = f"reporting.{context.name}"
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ReportingError(f"{where}: unknown key {unknown[0]!r} for type {kind} (known: {', '.join(known)})")
    endpoint = options.get("endpoint", "")
    if endpoint and (not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://"))):
        raise ReportingError(f"{where}.endpoint: {endpoint!r} is not an http or https URL")
    timeout = options.get("timeout", 5)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
        raise ReportingError(f"{where}.timeout: must be a number of seconds above 0, at most {MAX_TIMEOUT:g}")
    retries = options.get("retries", 0)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise ReportingError(f"{where}.retries: must be an integer from 0 to {MAX_RETRIES}")
    headers = options.get("headers") or {}
    if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and "\n" not in k + v and "\r" not in k + v
            for k, v in headers.items()):
        raise ReportingError(f"{where}.headers: must map header names to one-line strings")
    return endpoint, float(timeout), retries, dict(headers)


class WebhookHandler:
    def __init__(self, name: str, endpoint: str, timeout: float, retries: int, headers: dict, oauth: tuple | None):
        from cloudseed.agent.reporting._sender import Sender

        self.endpoint = endpoint
        self.timeout = timeout
        self.retries = retries
        self.headers = headers
        self.oauth = oauth
        self.sender = Sender(name, self._post, batch=1)

    def _post(self, items: list) -> None:
        from cloudseed.core.http import fetch_response

        headers = {"Content-Type": "application/json", **self.headers}
        if self.oauth:
            from cloudseed.core import oauth

            headers["Authorization"] = oauth.header(*self.oauth)
        fetch_response(self.endpoint, method="POST", data=items[0], headers=headers, timeout=self.timeout,
                       retries=self.retries, backoff=0.5, max_bytes=64 * 1024,
                       max_wait=(self.timeout + 1) * (self.retries + 1))

    def publish(self, event: Any) -> None:
        self.sender.put(json.dumps(event.as_dict()).encode())

    def flush(self, deadline: float) -> None:
        self.sender.flush(deadline)


def make(options: dict, context: Any) -> WebhookHandler:
    from cloudseed.agent.reporting import ReportingError

    endpoint, timeout, retries, headers = check_common(options, context, "webhook", KNOWN)
    if not endpoint:
        raise ReportingError(f"reporting.{context.name}.endpoint: required for type webhook")
    keys = [options.get(k) for k in ("consumer_key", "token_key", "token_secret", "consumer_secret")]
    oauth = tuple(str(k or "") for k in keys) if any(keys) else None
    context.reporter.secrets.add_values([v for k, v in headers.items() if k.lower() in ("authorization", "cookie")
                                         or "token" in k.lower() or "key" in k.lower()])
    return WebhookHandler(context.name, endpoint, timeout, retries, headers, oauth)
