"""``type: cloudseed``: events to the cloudseed metadata server, which keeps each instance's timeline.

POSTs batches (``{"events": [...]}``, up to ``BATCH`` at a time) to ``endpoint``, by default
``http://169.254.169.254/cloudseed/v1/events``, where the server identifies the instance as for
any metadata request and records its provisioning state (docs/metadata-server.md). When the
server requires IMDSv2 session tokens (a 401), one is fetched from the same host
(``PUT /latest/api/token``) and sent from then on. Settings: ``endpoint``, ``timeout`` (default
2 s), ``retries`` (default 2); sent from a background thread like the webhook's.
"""

from __future__ import annotations

import json
import urllib.parse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_ENDPOINT = "http://169.254.169.254/cloudseed/v1/events"
BATCH = 100
TOKEN_PATH = "/latest/api/token"
TOKEN_TTL = "21600"


class CloudseedHandler:
    def __init__(self, name: str, endpoint: str, timeout: float, retries: int):
        from cloudseed.agent.reporting._sender import Sender

        self.endpoint = endpoint
        self.timeout = timeout
        self.retries = retries
        self.token = ""
        self.sender = Sender(name, self._post, batch=BATCH)

    def _token(self) -> str:
        from cloudseed.core.http import request

        parts = urllib.parse.urlsplit(self.endpoint)
        answer = request(f"{parts.scheme}://{parts.netloc}{TOKEN_PATH}", method="PUT", timeout=self.timeout,
                         headers={"X-aws-ec2-metadata-token-ttl-seconds": TOKEN_TTL}, max_bytes=4096)
        return answer.body.decode("ascii", "replace").strip()

    def _post(self, items: list) -> None:
        from cloudseed.core.http import FetchError, fetch_response

        body = json.dumps({"events": items}).encode()
        for attempt in range(2):
            headers = {"Content-Type": "application/json"}
            if self.token:
                headers["X-aws-ec2-metadata-token"] = self.token
            try:
                fetch_response(self.endpoint, method="POST", data=body, headers=headers, timeout=self.timeout,
                               retries=self.retries, backoff=0.3, max_bytes=64 * 1024,
                               max_wait=(self.timeout + 0.5) * (self.retries + 1))
                return
            except FetchError as e:
                if e.status != 401 or attempt:
                    raise
                self.token = self._token()  # tokens required here: fetch one, then once more

    def publish(self, event: Any) -> None:
        self.sender.put(event.as_dict())

    def flush(self, deadline: float) -> None:
        self.sender.flush(deadline)


def make(options: dict, context: Any) -> CloudseedHandler:
    from cloudseed.agent.reporting.webhook import check_common

    defaults = {"timeout": 2, "retries": 2, **options}
    endpoint, timeout, retries, _ = check_common(defaults, context, "cloudseed", ("endpoint", "timeout", "retries"))
    return CloudseedHandler(context.name, endpoint or DEFAULT_ENDPOINT, timeout, retries)
