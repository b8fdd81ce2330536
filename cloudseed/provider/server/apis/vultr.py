"""Vultr's metadata API: ``/v1.json`` (the whole document) and the ``/v1/`` path tree.

The document is ``provider/instance_data/vultr.py``. ``/v1.json`` is it as JSON; under ``/v1/`` a
directory lists its entries one a line (``name/`` for directories, list items as ``0/``), a leaf
is its text (lists of names one a line: ``public-keys``, ``tags``). No header is required (the
``Metadata-Token`` cloud-init sends is accepted and not checked, as Vultr's). Answers are
rendered once per instance and path (``MetadataApp._cached``).
"""

from __future__ import annotations

from typing import Any

from cloudseed.clouds.vultr import CLOUD
from cloudseed.provider.instance_data import vultr
from cloudseed.provider.server.apis import _json_tree as json_tree

PREFIX = CLOUD.base  # the wire contract: clouds/vultr.py


def handle(app: Any, request: Any, instance: Any) -> Any:
    return json_tree.handle(app, request, instance, PREFIX, "vultr", vultr.metadata)
