"""Azure's wire server protocol, the agent's side: read the goal state, report the VM ready.

Until a VM reports ready, Azure considers its deployment unfinished (and fails it after a
while). ``report_ready`` GETs ``/machine/?comp=goalstate`` (``x-ms-agent-name``,
``x-ms-version: 2012-11-30``), takes ``Incarnation``, ``Container/ContainerId`` and
``RoleInstance/InstanceId``, and POSTs a health report with the state ``Ready`` to
``/machine?comp=health``; ``report_health`` posts any state, ``NotReady`` with a substatus
(``ProvisioningFailed``) and a description being how a failed provisioning is told (strict mode,
``cloudseed/agent/boot/strict.py``). Every request goes through ``cloudseed.core.http`` with bounded retries
inside one total deadline: a wire server that never answers costs at most ``deadline`` seconds.
The address is DHCP option 245 from a lease on the machine, else the well-known 168.63.129.16.
"""

from __future__ import annotations

import logging
import os
import time
from xml.sax.saxutils import escape

from cloudseed.clouds.azure import CLOUD
from cloudseed.clouds.azure import GOAL_STATE as GOAL_STATE_PATHS

LOG = logging.getLogger("cloudseed.datasources.azure")

WELL_KNOWN = CLOUD.names["wire_server"]  # the wire contract: clouds/azure.py
GOAL_STATE, HEALTH = CLOUD.requests["goal_state"], CLOUD.requests["health"]
HEADERS = GOAL_STATE.headers()
MAX_GOAL_STATE = 1024 * 1024
LEASE_DIRS = ("/run/systemd/netif/leases", "/var/lib/dhcp", "/var/lib/dhclient")

HEALTH_TEMPLATE = """\
<?xml version="1.0" encoding="utf-8"?>
<Health xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema">
  <GoalStateIncarnation>{incarnation}</GoalStateIncarnation>
  <Container>
    <ContainerId>{container}</ContainerId>
    <RoleInstanceList>
      <Role>
        <InstanceId>{instance}</InstanceId>
        <Health>
          <State>{state}</State>{details}
        </Health>
      </Role>
    </RoleInstanceList>
  </Container>
</Health>
"""


class WireServerError(Exception):
    """The VM could not be reported ready."""


def _decode_245(value: str) -> str | None:
    """``a83f8110`` (networkd) or ``a8:3f:81:10`` (dhclient) as a dotted address."""
    digits = value.strip().strip(";").replace(":", "")
    if len(digits) != 8:
        parts = value.strip().strip(";").split(":")
        if len(parts) == 4 and all(p and len(p) <= 2 for p in parts):
            digits = "".join(p.zfill(2) for p in parts)
    try:
        return ".".join(str(int(digits[i:i + 2], 16)) for i in range(0, 8, 2)) if len(digits) == 8 else None
    except ValueError:
        return None


def endpoint_from_leases(root_path: str = "/") -> str | None:
    """The wire server address from DHCP option 245 in a lease file on the machine, if any."""
    for directory in LEASE_DIRS:
        top = os.path.join(root_path, directory.lstrip("/"))
        try:
            names = sorted(os.listdir(top))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(top, name), errors="replace") as f:
                    text = f.read(256 * 1024)
            except OSError:
                continue
            for line in reversed(text.splitlines()):  # the newest lease last in dhclient's files
                line = line.strip()
                value = None
                if line.startswith("OPTION_245="):
                    value = line.partition("=")[2]
                elif "unknown-245" in line:
                    value = line.split("unknown-245", 1)[1]
                if value:
                    found = _decode_245(value)
                    if found:
                        return found
    return None


def _goal_state(text: bytes) -> tuple[str, str, str]:
    import xml.etree.ElementTree as ET

    if b"<!doctype" in text.lower() or b"<!entity" in text.lower():
        raise WireServerError("goal state carries a DTD; refused")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise WireServerError(f"goal state is not XML: {e}") from None
    incarnation, container, instance = (root.findtext("./" + GOAL_STATE_PATHS[role])
                                        for role in ("incarnation", "container_id", "instance_id"))
    if not (incarnation and container and instance):
        raise WireServerError("goal state lacks " + ", ".join(GOAL_STATE_PATHS.values()))
    return incarnation.strip(), container.strip(), instance.strip()


DETAILS_TEMPLATE = """
          <Details>
            <SubStatus>{substatus}</SubStatus>
            <Description>{description}</Description>
          </Details>"""
MAX_DESCRIPTION = 1024  # what the wire server keeps of a failure's description


def health_report(incarnation: str, container: str, instance: str, state: str = "Ready", substatus: str = "",
                  description: str = "") -> bytes:
    details = DETAILS_TEMPLATE.format(substatus=escape(substatus), description=escape(description[:MAX_DESCRIPTION])) \
        if substatus else ""
    return HEALTH_TEMPLATE.format(incarnation=escape(incarnation), container=escape(container),
                                  instance=escape(instance), state=escape(state), details=details).encode("utf-8")


def report_ready(endpoint: str, deadline: float = 30.0, timeout: float = 5.0, retries: int = 5) -> str:
    """Report Ready to the wire server at ``endpoint`` within ``deadline`` seconds in total.

    Returns the role instance id reported; ``WireServerError`` when it could not be done.
    """
    return report_health(endpoint, "Ready", deadline=deadline, timeout=timeout, retries=retries)


def report_health(endpoint: str, state: str, substatus: str = "", description: str = "", deadline: float = 30.0,
                  timeout: float = 5.0, retries: int = 5) -> str:
    """Report ``state`` (Ready, or NotReady with a ``substatus`` such as ProvisioningFailed and a
    ``description``: cloud-init's failure report) to the wire server at ``endpoint``.

    Returns the role instance id reported; ``WireServerError`` when it could not be done.
    """
    from cloudseed.core.http import FetchError, fetch_response

    end = time.monotonic() + deadline
    host = f"[{endpoint}]" if endpoint.count(":") > 1 and not endpoint.startswith("[") else endpoint  # IPv6
    try:
        answer = fetch_response(f"http://{host}{GOAL_STATE.target()}", headers=HEADERS, timeout=timeout,
                                retries=retries, max_bytes=MAX_GOAL_STATE,
                                max_wait=max(0.1, end - time.monotonic()))
        incarnation, container, instance = _goal_state(answer.body)
        left = end - time.monotonic()
        if left <= 0:
            raise WireServerError(f"no time left to post the health report to {endpoint}")
        fetch_response(f"http://{host}{HEALTH.target()}", method=HEALTH.method, headers=HEALTH.headers(),
                       data=health_report(incarnation, container, instance, state, substatus, description),
                       timeout=min(timeout, left),
                       retries=retries, max_bytes=MAX_GOAL_STATE, max_wait=left)
    except FetchError as e:
        raise WireServerError(f"wire server {endpoint}: {e}") from None
    LOG.info("Azure: reported %s to %s (instance %s, incarnation %s)", state, endpoint, instance, incarnation)
    return instance
