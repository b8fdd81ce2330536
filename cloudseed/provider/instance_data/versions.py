"""The one table of OpenStack metadata versions: which files and keys each version has (Nova's).

Files: ``meta_data.json`` and ``user_data`` from the first version, ``password`` from 2013-04-04
(served only: a config drive is read-only), ``vendor_data.json`` from 2013-10-17,
``network_data.json`` from 2015-10-15, ``vendor_data2.json`` from 2016-10-06. ``meta_data.json``
keys: ``random_seed`` from 2013-04-04, ``project_id`` from 2015-10-15, ``devices`` from
2016-06-30, ``dedicated_cpus`` from 2020-10-14. A config drive carries every version (Nova writes
every version it knows), the service answers every version.
"""

from __future__ import annotations

from typing import Optional

FOLSOM, GRIZZLY, HAVANA, LIBERTY = "2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15"
NEWTON_ONE, NEWTON_TWO, OCATA, ROCKY, VICTORIA = ("2016-06-30", "2016-10-06", "2017-02-22", "2018-08-27",
                                                  "2020-10-14")
OPENSTACK_VERSIONS = (FOLSOM, GRIZZLY, HAVANA, LIBERTY, NEWTON_ONE, NEWTON_TWO, OCATA, ROCKY, VICTORIA)
OPENSTACK_LATEST = OPENSTACK_VERSIONS[-1]

# file -> first version that has it
OPENSTACK_FILES = {"meta_data.json": FOLSOM, "user_data": FOLSOM, "password": GRIZZLY,
                   "vendor_data.json": HAVANA, "network_data.json": LIBERTY, "vendor_data2.json": NEWTON_TWO}
SERVED_ONLY = ("password",)  # the password API needs a writable service

# meta_data.json key -> first version that has it
META_DATA_KEYS = {"random_seed": GRIZZLY, "project_id": LIBERTY, "devices": NEWTON_ONE,
                  "dedicated_cpus": VICTORIA}


def resolve_openstack(version: str) -> Optional[str]:
    """``latest`` or a known version, resolved; None for anything else."""
    if version == "latest":
        return OPENSTACK_LATEST
    return version if version in OPENSTACK_VERSIONS else None


def has_file(version: str, name: str) -> bool:
    """Whether OpenStack metadata ``version`` (resolved) has the file ``name``."""
    since = OPENSTACK_FILES.get(name)
    return since is not None and since <= version


def has_key(version: str, key: str) -> bool:
    """Whether ``meta_data.json`` of ``version`` (resolved) carries ``key``."""
    return META_DATA_KEYS.get(key, FOLSOM) <= version
