"""AltCloud's (Red Hat's deltacloud: RHEV-M and vSphere) user-data as its guest reads it: a file
``deltacloud-user-data.txt`` (or ``user-data.txt``) on the floppy ``/dev/fd0`` (RHEV) or on a
filesystem labelled ``CDROM`` (vSphere); which of the two is named by ``/etc/sysconfig/cloud-info``
(else DMI). There is no metadata. No seed builder of ours writes it yet.

Read by ``agent/datasources/altcloud.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

FLOPPY = "/dev/fd0"
LABEL = "CDROM"

CLOUD = Cloud(
    "altcloud", datasource="AltCloud", served=False,
    addresses=(FLOPPY, LABEL),  # RHEV's floppy device, vSphere's filesystem label
    names={"cloud_info": "/etc/sysconfig/cloud-info", "rhev": "RHEV", "vsphere": "VSPHERE"},
    requests={
        "user_data": Request("deltacloud-user-data.txt"),
        "user_data_old": Request("user-data.txt"),  # when the first is not there
    },
)
