"""NoCloud's seed as its guest reads it: four files, ``meta-data`` (YAML), ``user-data``, ``vendor-data``
and ``network-config``, on a ``cidata`` filesystem, in a seed directory or under a ``seedfrom`` URL;
the metadata server serves them under ``/nocloud/``. Where the seed is comes from the machine, the
settings or the kernel command line, so there is no default address.

Read by ``agent/datasources/nocloud.py``, served by ``provider/server/apis/nocloud.py`` with
``metadata_app.py``; written to seed images by ``provider/seeds/``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# ``meta-data``'s keys, by role: cloud-init's own metadata keys (NoCloud is cloud-init's seed format;
# the guest keeps the document as its metadata, as cloud-init does), written by the server from here
FIELDS = {"instance_id": "instance-id", "local_hostname": "local-hostname", "public_keys": "public-keys"}

CLOUD = Cloud(
    "nocloud", datasource="NoCloud",
    addresses=(),
    base="/nocloud/",
    prefixes=("/nocloud",),
    fields=FIELDS,
    requests={  # the seed's files, in the order the guest reads them
        "meta_data": Request("/nocloud/meta-data", form="yaml",
                             fields=(FIELDS["instance_id"], FIELDS["local_hostname"])),
        "user_data": Request("/nocloud/user-data"),
        "vendor_data": Request("/nocloud/vendor-data"),
        "network_config": Request("/nocloud/network-config", form="yaml"),
    },
)
