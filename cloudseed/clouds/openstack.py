"""OpenStack Nova's metadata service as its guest reads it: ``/openstack`` lists the versions, the
newest the guest understands is read: ``meta_data.json``, ``user_data``, the vendor data,
``network_data.json`` and the password, each under ``/openstack/<version>/``. A config drive
carries the same tree as files (``openstack/<version>/...``), so both read these paths.

Read by ``agent/datasources/openstack.py`` (and ``configdrive.py``, through
``_openstack_common.py``); served by ``provider/server/apis/openstack.py`` with ``metadata_app.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

VERSIONED = "/openstack/{version}/"

# the documents' fields, by role: ``meta_data.json``'s (a ``keys`` entry's too), ``network_data.json``'s
# top level (its links and networks are the network_data format, ``cloudseed/network/openstack.py``)
# and the vendor data's ``cloud-init`` entry; the guest reads them, the server writes them
FIELDS = {"instance_id": "uuid", "name": "name", "hostname": "hostname", "zone": "availability_zone",
          "launch_index": "launch_index", "meta": "meta", "public_keys": "public_keys", "keys": "keys",
          "key_name": "name", "key_type": "type", "key_data": "data", "files": "files",
          "project_id": "project_id", "devices": "devices", "dedicated_cpus": "dedicated_cpus",
          "admin_pass": "admin_pass", "random_seed": "random_seed",
          "links": "links", "networks": "networks", "services": "services", "vendor_cloud_init": "cloud-init"}

CLOUD = Cloud(
    "openstack", datasource="OpenStack",
    addresses=("http://169.254.169.254",),
    prefixes=("/openstack",),
    # Nova's metadata versions the guest understands, newest first; "latest" when none is listed
    versions=("2018-08-27", "2017-02-22", "2016-10-06", "2016-06-30", "2015-10-15", "2013-10-17", "2013-04-04",
              "2012-08-10"),
    names={"latest": "latest"},
    fields=FIELDS,
    requests={
        "versions": Request("/openstack", form="listing"),
        "meta_data": Request(VERSIONED + "meta_data.json", form="json",
                             fields=tuple(FIELDS[k] for k in ("instance_id", "hostname", "name", "public_keys",
                                                              "zone"))),
        "user_data": Request(VERSIONED + "user_data"),
        "vendor_data": Request(VERSIONED + "vendor_data.json", form="json"),
        "vendor_data2": Request(VERSIONED + "vendor_data2.json", form="json"),
        "network_data": Request(VERSIONED + "network_data.json", form="json",
                                fields=(FIELDS["links"], FIELDS["networks"])),
        "password": Request(VERSIONED + "password"),  # an operator-set password (404 without one)
    },
)
