"""Apache CloudStack's metadata API (the virtual router's): ``/latest/meta-data/...``, ``/latest/user-data``.

Answered for an instance whose record has ``clouds.cloudstack`` (``routes.api_for``: the
EC2-shaped paths are otherwise EC2's). ``/`` lists the versions (``1.0``, ``latest``);
``/<version>/`` lists ``meta-data`` and ``user-data``; ``/<version>/meta-data/`` the flat
entries of ``provider/instance_data/cloudstack.py`` (one per line), each a text leaf;
``user-data`` is the raw user-data (404 when there is none). The password is the password
server's (``password_server.py``). Answers are rendered once per instance and path.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from cloudseed.clouds import cloudstack as cloudstack_contract
from cloudseed.clouds import exoscale as exoscale_contract
from cloudseed.provider.instance_data import cloudstack
from cloudseed.provider.server.engine.http import Response, text_error

# the versions the guests of CloudStack and Exoscale ask (their contracts), served to both: 1.0, latest
VERSIONS = (*exoscale_contract.CLOUD.versions, *cloudstack_contract.CLOUD.versions)


def handle(app: Any, request: Any, instance: Any) -> Any:
    return handle_tree(app, request, instance, "cs", VERSIONS,
                       lambda record: cloudstack.meta_data(record, "cloudstack"))


def handle_tree(app: Any, request: Any, instance: Any, prefix: str, versions: tuple[str, ...],
                tree_of: Callable[[Any], dict]) -> Any:
    """An EC2-shaped API: ``/<version>/meta-data/<tree path>`` and ``/<version>/user-data``."""
    if request.method not in ("GET", "HEAD"):
        return text_error(405, "method not allowed; use GET", [("Allow", "GET, HEAD")])
    parts = tuple(p for p in request.path.split("/") if p)
    if parts and parts[0] not in versions:
        return text_error(404, "not found")
    record = instance.record
    return app._cached(request, instance, f"{prefix}/" + "/".join(parts),
                       lambda: render(record, parts, versions, tree_of))


def render(record: Any, parts: tuple, versions: tuple[str, ...], tree_of: Callable[[Any], dict]) -> Optional[Response]:
    if not parts:
        return Response(200, "\n".join(versions) + "\n")
    if len(parts) == 1:
        return Response(200, "meta-data\n" + ("user-data\n" if record.user_data is not None else ""))
    if parts[1:] == ("user-data",):
        return None if record.user_data is None else Response(200, record.user_data, "application/octet-stream")
    if parts[1] != "meta-data":
        return None
    return render_tree(tree_of(record), parts[2:])


def render_tree(tree: Any, parts: tuple) -> Optional[Response]:
    """A node of ``tree`` (dicts are directories listed one entry a line, sub-directories ending in
    ``/``; strings are leaves); None when there is no such node."""
    node = tree
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, dict):
        return Response(200, "\n".join(f"{k}/" if isinstance(v, dict) else k for k, v in node.items()))
    return Response(200, str(node))
