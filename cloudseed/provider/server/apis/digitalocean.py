"""DigitalOcean's droplet metadata API: ``/metadata/v1.json`` and the ``/metadata/v1/`` path tree.

The document is ``provider/instance_data/digitalocean.py``. A directory lists its entries one a
line (``name/`` for directories, list items as ``0/``); a leaf is its text (booleans ``true`` /
``false``, lists of names one a line: ``public-keys``, ``tags``, ``dns/nameservers``). No header
is required (as DO's). Answers are rendered once per instance and path (``MetadataApp._cached``).
"""

from __future__ import annotations

from typing import Any

from cloudseed.clouds.digitalocean import CLOUD
from cloudseed.provider.instance_data import digitalocean
from cloudseed.provider.server.apis import _json_tree as json_tree

PREFIX = CLOUD.base  # the wire contract: clouds/digitalocean.py


def handle(app: Any, request: Any, instance: Any) -> Any:
    return json_tree.handle(app, request, instance, PREFIX, "do", digitalocean.metadata, tree=digitalocean.tree)
