"""Google Compute Engine's metadata server as its guest reads it: ``/computeMetadata/v1/``, every request
and answer carrying ``Metadata-Flavor: Google``, directories read whole with ``?recursive=true``.

Read by ``agent/datasources/gce.py``, served by ``provider/server/apis/gce.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

PREFIX = "/computeMetadata"
FLAVOR = ("Metadata-Flavor", "Google")

CLOUD = Cloud(
    "gce", datasource="GCE",
    addresses=("http://169.254.169.254",),
    base=PREFIX + "/{version}/",
    prefixes=(PREFIX,),
    versions=("v1",),
    names={"prefix": PREFIX, "flavor": FLAVOR[0], "flavor_value": FLAVOR[1]},
    requests={
        "instance": Request(PREFIX + "/{version}/instance/", query="recursive=true", sends=(FLAVOR,),
                            answers=(FLAVOR,), form="json", fields=("id", "zone", "hostname", "attributes",
                                                                     "networkInterfaces")),
        "project": Request(PREFIX + "/{version}/project/attributes/", query="recursive=true", sends=(FLAVOR,),
                           answers=(FLAVOR,), form="json"),
        "user_data": Request(PREFIX + "/{version}/instance/attributes/user-data", sends=(FLAVOR,),
                             answers=(FLAVOR,)),
    },
)
