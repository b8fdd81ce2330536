"""LXD's and Incus's devlxd API as its guest reads it: HTTP over the Unix socket ``/dev/lxd/sock``,
API version ``1.0``: the instance's ``meta-data``, the list of its ``config`` keys (each read at
``/1.0/config/<key>``) and its ``devices``. No server of ours answers it yet.

Read by ``agent/datasources/lxd.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

SOCKET = "/dev/lxd/sock"

# the config keys the guest reads, by role; ``cloud-init.*`` (LXD 4.x on) win over the older ``user.*``
FIELDS = {"user_data": "cloud-init.user-data", "network_config": "cloud-init.network-config",
          "vendor_data": "cloud-init.vendor-data", "user_data_old": "user.user-data",
          "network_config_old": "user.network-config", "vendor_data_old": "user.vendor-data",
          "meta_data_old": "user.meta-data"}

CLOUD = Cloud(
    "lxd", datasource="LXD", served=False,
    addresses=(SOCKET,),  # a Unix socket, HTTP/1.0 over it
    base="/{version}",
    versions=("1.0",),
    names={"socket": SOCKET, "config_prefix": "/{version}/config/"},
    fields=FIELDS,
    requests={
        "meta_data": Request("/{version}/meta-data", form="yaml"),
        "config": Request("/{version}/config", form="json"),  # a list of /1.0/config/<key> routes
        "devices": Request("/{version}/devices", form="json"),  # not in older LXD
    },
)
