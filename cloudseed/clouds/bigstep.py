"""Bigstep's metadata as its guest reads it: one JSON document at the URL Bigstep's image writes in
``/var/lib/cloud/data/seed/bigstep/url`` (no fixed address), with ``metadata`` (a mapping),
``userdata_raw`` and ``vendordata_raw`` (strings). No server of ours answers it yet.

Read by ``agent/datasources/bigstep.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

# the files that name the document's URL: cloud-init's seed path, then cloudseed's
URL_FILES = ("/var/lib/cloud/data/seed/bigstep/url", "/var/lib/cloudseed/data/seed/bigstep/url")

# the document's fields, by role (``public_keys`` inside ``metadata``)
FIELDS = {"metadata": "metadata", "user_data": "userdata_raw", "vendor_data": "vendordata_raw",
          "public_keys": "public-keys"}

CLOUD = Cloud(
    "bigstep", datasource="Bigstep", served=False,
    addresses=(),  # the URL is the one the file names
    names={"url_file": URL_FILES[0], "url_file_cloudseed": URL_FILES[1]},
    fields=FIELDS,
    requests={
        "document": Request("", form="json",
                            fields=tuple(FIELDS[k] for k in ("metadata", "user_data", "vendor_data"))),
    },
)
