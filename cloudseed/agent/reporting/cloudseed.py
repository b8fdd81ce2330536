"""``type: cloudseed``: events to the cloudseed metadata server, which keeps each instance's timeline.

POSTs batches (``{"events": [...]}``, up to ``BATCH`` at a time) to ``endpoint``, where the
server identifies the instance as for any metadata request and records its provisioning state
(docs/metadata-server.md). Without an ``endpoint`` setting, the endpoint is on the host of the
service the datasource read the instance from (``Datasource.service_url``: EC2's, OpenStack's,
GCE's... metadata service, Azure's IMDS, NoCloud's ``seedfrom`` URL), path ``EVENTS_PATH``;
a datasource that read local media, files or a socket has no such host: then nothing is sent and
the status says so. Events wait (``held``, at most ``MAX_HELD``) until the datasource is known
and the network is up (from the network stage on), then go in order. When the server requires
IMDSv2 session tokens (a 401), one is fetched from the same host (``PUT /latest/api/token``) and
sent from then on. Settings: ``endpoint``, ``timeout`` (default 2 s), ``retries`` (default 2);
sent from a background thread like the webhook's.
"""

from __future__ import annotations

import json
import logging
import urllib.parse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.reporting")
EVENTS_PATH = "/cloudseed/v1/events"
BATCH = 100
MAX_HELD = 2000


def endpoint_for(datasource: Any) -> str | None:
    """The events endpoint on the host the datasource read the instance from (None: no such host)."""
    url = datasource.service_url() if datasource is not None else None
    if not url:
        return None
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{EVENTS_PATH}"


class CloudseedHandler:
    def __init__(self, context: Any, endpoint: str, timeout: float, retries: int):
        self.context = context
        self.endpoint = endpoint  # "" until the datasource says where
        self.timeout = timeout
        self.retries = retries
        self.token = ""
        self.held: list[dict] = []
        self.sender: Any = None  # the background sender, once the endpoint is known and reachable
        self.off = False  # no endpoint can be found: events are not kept

    @property
    def holding(self) -> bool:
        """Events are kept for an endpoint not known yet."""
        return self.sender is None and not self.off

    def locate(self, datasource: Any, stage: str | None) -> None:
        """The datasource found so far and the stage running (``Reporter.locate``)."""
        if not self.holding or stage == "local":
            return  # the network is up from the network stage on
        if not self.endpoint:
            if datasource is None:
                return  # the network stage may still find one
            self.endpoint = endpoint_for(datasource) or ""
            if not self.endpoint:
                self.off = True
                self.held = []
                self.context.reporter.problem(
                    f"reporting.{self.context.name}: no endpoint: the datasource {datasource.name} read this "
                    f"instance from {datasource.subplatform or 'local data'}, not a metadata service; events "
                    f"are not sent (set reporting.{self.context.name}.endpoint)")
                return
        from cloudseed.agent.reporting._sender import Sender

        LOG.info("reporting %s: events to %s", self.context.name, self.endpoint)
        self.sender = Sender(self.context.name, self._post, batch=BATCH)
        for item in self.held:
            self.sender.put(item)
        self.held = []

    def _token(self) -> str:
        from cloudseed.clouds.ec2 import CLOUD
        from cloudseed.core.http import request

        parts = urllib.parse.urlsplit(self.endpoint)
        asked = CLOUD.requests["token"]
        answer = request(f"{parts.scheme}://{parts.netloc}{asked.path}", method=asked.method, timeout=self.timeout,
                         headers=asked.headers(), max_bytes=4096)
        return answer.body.decode("ascii", "replace").strip()

    def _post(self, items: list) -> None:
        from cloudseed.core.http import FetchError, fetch_response

        body = json.dumps({"events": items}).encode()
        for attempt in range(2):
            headers = {"Content-Type": "application/json"}
            if self.token:
                from cloudseed.clouds.ec2 import CLOUD

                headers[CLOUD.names["token"]] = self.token
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
        if self.sender is not None:
            self.sender.put(event.as_dict())
        elif not self.off:
            self.held.append(event.as_dict())
            del self.held[:-MAX_HELD]

    def flush(self, deadline: float) -> None:
        if self.sender is not None:
            self.sender.flush(deadline)
        elif self.held:
            LOG.warning("reporting %s: %d event(s) not sent: the process ends before the network stage "
                        "and a datasource said where the metadata server is", self.context.name, len(self.held))
            self.held = []


def make(options: dict, context: Any) -> CloudseedHandler:
    from cloudseed.agent.reporting.webhook import check_common

    defaults = {"timeout": 2, "retries": 2, **options}
    endpoint, timeout, retries, _ = check_common(defaults, context, "cloudseed", ("endpoint", "timeout", "retries"))
    return CloudseedHandler(context, endpoint, timeout, retries)
