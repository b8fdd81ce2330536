"""Hetzner Cloud's metadata API: ``/hetzner/v1/metadata`` (YAML), its keys, ``/userdata`` and private networks.

``/hetzner/v1/metadata`` is the whole document (``provider/instance_data/hetzner.py``) as YAML;
``/hetzner/v1/metadata/KEY`` one key (text for scalars, YAML otherwise), ``private-networks``
included; ``/hetzner/v1/userdata`` the raw user-data (empty when there is none, as Hetzner's).
No header is required (as Hetzner's). Answers are rendered once per instance and path.
"""

from __future__ import annotations

from typing import Any, Optional

from cloudseed.clouds.hetzner import CLOUD
from cloudseed.provider.instance_data import hetzner
from cloudseed.provider.server.engine.http import Response, text_error

PREFIX = CLOUD.base  # the wire contract: clouds/hetzner.py
YAML = "text/yaml"


def handle(app: Any, request: Any, instance: Any) -> Any:
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    rest = request.path[len(PREFIX):]
    if not (rest == "" or rest.startswith("/")):
        return text_error(404, "not found")
    parts = tuple(p for p in rest.split("/") if p)
    record = instance.record
    return app._cached(request, instance, "hz/" + "/".join(parts), lambda: render(record, parts))


def render(record: Any, parts: tuple) -> Optional[Response]:
    import yaml

    if parts == ():
        return Response(200, "metadata\nuserdata\n")
    if parts == ("userdata",):
        return Response(200, record.user_data or b"", "text/plain")
    if parts[0] != "metadata" or len(parts) > 2:
        return None
    doc = hetzner.metadata(record)
    if len(parts) == 1:
        return Response(200, yaml.safe_dump(doc, default_flow_style=False, sort_keys=True), YAML)
    if parts[1] == "private-networks":
        return Response(200, yaml.safe_dump(hetzner.private_networks(record), default_flow_style=False), YAML)
    if parts[1] not in doc:
        return None
    value = doc[parts[1]]
    if isinstance(value, (dict, list)):
        return Response(200, yaml.safe_dump(value, default_flow_style=False), YAML)
    return Response(200, str(value))
