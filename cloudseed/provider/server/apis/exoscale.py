"""Exoscale's metadata API: ``/1.0/meta-data/...`` and ``/1.0/user-data`` (also ``/latest/...``).

Answered for an instance whose record has ``clouds.exoscale`` (``routes.api_for``). Exoscale
runs CloudStack, so the tree is CloudStack's (``provider/instance_data/cloudstack.py``, settings
from ``clouds.exoscale``), rendered by ``cloudstack.handle_tree``. The password is the
password server's (``password_server.py``, port 8080 of the same address).
"""

from __future__ import annotations

from typing import Any

from cloudseed.clouds.exoscale import CLOUD
from cloudseed.provider.instance_data import cloudstack
from cloudseed.provider.server.apis.cloudstack import VERSIONS, handle_tree

assert set(CLOUD.versions) <= set(VERSIONS), "cloudstack_api.VERSIONS serves Exoscale's"


def handle(app: Any, request: Any, instance: Any) -> Any:
    return handle_tree(app, request, instance, "exo", VERSIONS,
                       lambda record: cloudstack.meta_data(record, "exoscale"))
