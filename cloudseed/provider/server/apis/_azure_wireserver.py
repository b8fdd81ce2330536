"""Azure's wire server (``/machine``), as the platform's fabric answers a VM's agent.

``GET /?comp=versions`` lists the protocol versions (no ``x-ms-version`` needed, as the fabric
answers it). ``GET /machine/?comp=goalstate`` answers the instance's goal state (incarnation 1, its container
and role instance ids); ``POST /machine?comp=health`` takes the health report the agent sends
once provisioned. A report naming another container or role instance is a 403; a report that
is not XML, carries a DTD or is larger than ``MAX_REPORT`` is a 400. Accepted reports are kept
in the registry with the instance's phone_home posts (``{"azure_health": {...}}``), shown by
``cloudseed instances show ID`` as ``azure_health``. Both need ``x-ms-version`` (400 without),
as the fabric does. Serve it where the agent looks: ``--listen 168.63.129.16:80``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from cloudseed.clouds.azure import CLOUD, HEALTH_REPORT
from cloudseed.provider.instance_data import azure
from cloudseed.provider.server.engine.http import Response, text_error

MAX_REPORT = 64 * 1024
XML = "text/xml; charset=utf-8"


# the protocol versions the fabric lists at /?comp=versions (asked before any x-ms-version is known)
WIRE_VERSIONS = ("2015-04-05", "2012-11-30", "2012-09-15", "2012-05-15", "2011-12-31", "2011-10-15",
                 "2011-08-31", "2011-04-07", "2010-12-15", "2010-28-10")
_VERSIONS = ('<?xml version="1.0" encoding="utf-8"?>\n<Versions>\n  <Preferred>\n    <Version>'
             f'{WIRE_VERSIONS[0]}</Version>\n  </Preferred>\n  <Supported>\n'
             + "".join(f"    <Version>{v}</Version>\n" for v in WIRE_VERSIONS) + "  </Supported>\n</Versions>\n")


_VERSION_HEADER = CLOUD.names["wire_version"].lower()


def handle(app: Any, request: Any, instance: Any) -> Any:
    if request.path == "/":  # routed here only with ?comp=versions
        if request.method not in ("GET", "HEAD"):
            return text_error(405, "use GET", [("Allow", "GET, HEAD")])
        return Response(200, _VERSIONS, XML)
    if request.path.rstrip("/") != CLOUD.requests["goal_state"].path.rstrip("/"):  # the contract: clouds/azure.py
        return text_error(404, "Not found")
    if not request.headers.get(_VERSION_HEADER):
        return text_error(400, f"{CLOUD.names['wire_version']} header required")
    comp = dict(parse_qsl(request.query or "")).get("comp", "")
    record = instance.record
    if comp == "goalstate":
        if request.method not in ("GET", "HEAD"):
            return text_error(405, "use GET", [("Allow", "GET, HEAD")])
        found = instance.responses.get("azure/goalstate")  # rendered once per record version
        if found is None:
            found = instance.responses["azure/goalstate"] = Response(200, azure.goal_state(record), XML)
        return found
    if comp == "health":
        if request.method != "POST":
            return text_error(405, "use POST", [("Allow", "POST")])
        report = parse_report(request.body)
        if isinstance(report, str):
            return text_error(400, report)
        if report["container"] != azure.container_id(record) or report["instance"] != azure.role_instance_id(record):
            return text_error(403, "the health report names another container or role instance")
        return _store(app, record.instance_id, request.client, report)
    return text_error(400, f"unknown comp {comp!r} (goalstate, health)")


def parse_report(body: bytes) -> dict | str:
    """The report's fields, or why it is refused."""
    if len(body) > MAX_REPORT:
        return f"health report of {len(body)} bytes; the limit is {MAX_REPORT}"
    if b"<!doctype" in body.lower() or b"<!entity" in body.lower():
        return "health report carries a DTD; refused"
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(body)
    except ET.ParseError as e:
        return f"health report is not XML: {e}"
    if root.tag != HEALTH_REPORT["root"]:
        return f"health report's root is {root.tag!r}, not {HEALTH_REPORT['root']}"

    def text(role: str) -> str:
        return (root.findtext("./" + HEALTH_REPORT[role]) or "").strip()

    report = {"incarnation": root.findtext("./" + HEALTH_REPORT["incarnation"]) or "",
              "container": text("container_id"), "instance": text("instance_id"), "state": text("state"),
              "substatus": text("substatus"), "description": text("description")[:1024]}
    if not report["state"]:
        return f"health report has no {HEALTH_REPORT['state']}"
    return report


async def _store(app: Any, instance_id: str, source: str, report: dict) -> Response:
    await app.cache.run(app.registry.add_phone_home, instance_id, source, {"azure_health": report})
    return Response(200, "", XML)
