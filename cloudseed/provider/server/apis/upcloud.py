"""UpCloud's metadata API: ``/metadata/v1.json`` and the ``/metadata/v1/`` path tree.

Answered for instances whose record has ``clouds.upcloud`` (the path family is DigitalOcean's
otherwise, see ``routes.api_for``). The document is ``provider/instance_data/upcloud.py``; under
``/metadata/v1/`` a directory lists its entries one a line (``name/`` for directories, list
items as ``0/``), a leaf is its text (``true``/``false``; lists of names one a line). No header
is required. Answers are rendered once per instance and path (``MetadataApp._cached``).
"""

from __future__ import annotations

from typing import Any

from cloudseed.clouds.upcloud import CLOUD
from cloudseed.provider.instance_data import upcloud
from cloudseed.provider.server.apis import _json_tree as json_tree

PREFIX = CLOUD.base  # the wire contract: clouds/upcloud.py


def handle(app: Any, request: Any, instance: Any) -> Any:
    return json_tree.handle(app, request, instance, PREFIX, "uc", upcloud.metadata)
