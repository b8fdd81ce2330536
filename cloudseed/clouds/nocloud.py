"""NoCloud's seed as its guest reads it: four files, ``meta-data`` (YAML), ``user-data``, ``vendor-data``
and ``network-config``, on a ``cidata`` filesystem, in a seed directory or under a ``seedfrom`` URL;
the metadata server serves them under ``/nocloud/``. Where the seed is comes from the machine, the
settings or the kernel command line, so there is no default address.

Read by ``agent/datasources/nocloud.py``, served by ``provider/server/apis/nocloud.py`` with
``metadata_app.py``; written to seed images by ``provider/seeds/``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

CLOUD = Cloud(
    "nocloud", datasource="NoCloud",
    addresses=(),
    base="/nocloud/",
    prefixes=("/nocloud",),
    requests={  # the seed's files, in the order the guest reads them
        "meta_data": Request("/nocloud/meta-data", form="yaml", fields=("instance-id", "local-hostname")),
        "user_data": Request("/nocloud/user-data"),
        "vendor_data": Request("/nocloud/vendor-data"),
        "network_config": Request("/nocloud/network-config", form="yaml"),
    },
)
