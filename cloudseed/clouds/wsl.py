"""WSL's user-data as its guest reads it: files in the Windows user's profile (``%USERPROFILE%`` as
a Linux path), in ``.cloud-init/``: ``<instance>.meta-data``, and the first of
``<instance>.user-data``, ``<ID>-<VERSION_ID>.user-data``, ``<ID>-all.user-data``,
``default.user-data`` (names matched without regard to case); on Ubuntu, Landscape's
``.ubuntupro/.cloud-init/<instance>.user-data`` and the Ubuntu Pro agent's ``agent.yaml``. No
writer of ours makes them yet.

Read by ``agent/datasources/wsl.py``.
"""

from __future__ import annotations

from cloudseed.clouds import Cloud, Request

SEED, PRO_SEED = ".cloud-init", ".ubuntupro/.cloud-init"

CLOUD = Cloud(
    "wsl", datasource="WSL", served=False,
    addresses=(SEED, PRO_SEED),  # folders in the Windows user's profile
    names={"meta_data_suffix": ".meta-data", "user_data_suffix": ".user-data", "all": "all",
           "default": "default"},
    requests={
        "meta_data": Request("{instance}.meta-data", form="yaml"),
        "user_data": Request("{instance}.user-data"),
        "agent": Request("agent.yaml", form="yaml"),  # in PRO_SEED, merged over the user-data
    },
)
