"""Alibaba Cloud ECS's metadata API: ``/2016-01-01/meta-data/...`` (and ``/latest/``), ``user-data``.

Answered for an instance whose record has ``clouds.aliyun`` (``routes.api_for``; the real
service is at 100.100.100.200, so listen there). The tree is ``provider/instance_data/aliyun.py``:
directories list their entries one per line (sub-directories end in ``/``),
``public-keys/0/openssh-key`` holds a key. No session tokens (ECS's hardened mode is not
emulated). Rendered by ``cloudstack.handle_tree``, once per instance and path.
"""

from __future__ import annotations

from typing import Any

from cloudseed.clouds.aliyun import CLOUD
from cloudseed.provider.instance_data import aliyun
from cloudseed.provider.server.apis.cloudstack import handle_tree

VERSIONS = (*CLOUD.versions, "latest")  # the guest's (clouds/aliyun.py), and "latest" as ECS


def handle(app: Any, request: Any, instance: Any) -> Any:
    return handle_tree(app, request, instance, "ali", VERSIONS, aliyun.meta_data)
