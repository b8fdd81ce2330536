"""NoCloud over HTTP (``ds=nocloud;s=http://169.254.169.254/nocloud/``): four small files.

``meta-data`` is YAML (instance-id, local-hostname, public-keys), ``user-data`` the raw
user-data (empty when none: NoCloud requires the file), ``vendor-data`` the vendor-data text and
``network-config`` a network config version 2 derived from the instance's network data (404
when the instance has no NIC: an empty config would stop the guest's DHCP fallback). The
documents are ``provider/instance_data`` (shared with NoCloud seed images).
"""

from __future__ import annotations

from typing import Optional

import yaml

from cloudseed.clouds.nocloud import CLOUD
from cloudseed.provider.instance_data import nocloud
from cloudseed.provider.instance_data.network import nocloud_network_config
from cloudseed.provider.registry import InstanceRecord
from cloudseed.provider.server.engine.http import Response

FILES = tuple(CLOUD.tail(role) for role in CLOUD.requests)  # the wire contract: clouds/nocloud.py


def render(record: InstanceRecord, name: str) -> Optional[Response]:
    if name == "":
        return Response(200, "\n".join(FILES))
    if name == "meta-data":
        return Response(200, yaml.safe_dump(nocloud.meta_data(record), sort_keys=False), "text/yaml")
    if name == "user-data":
        return Response(200, record.user_data or b"", "application/octet-stream")
    if name == "vendor-data":
        return Response(200, nocloud.vendor_text(record.vendor_data), "application/octet-stream")
    if name == "network-config":
        config = nocloud_network_config(record)
        return None if config is None else Response(200, yaml.safe_dump(config, sort_keys=False), "text/yaml")
    return None
