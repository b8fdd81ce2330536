"""Oracle's ``regionInfo`` from the real table of OCI regions, and ``timeCreated`` from the record.

Issue 23: ``regionKey`` was the first three letters of the region name (``EU-`` for
eu-frankfurt-1, not ``FRA``) and ``timeCreated`` was 0.
"""

from __future__ import annotations

import pytest

from cloudseed.provider.instance_data.oci_regions import REGIONS, region_info
from tests.provider.server.server_support import new_address

BEARER = {"Authorization": "Bearer Oracle"}


@pytest.mark.parametrize("settings, zone, info", [
    ({"region": "eu-frankfurt-1"}, "eu-frankfurt-1-ad-1",
     {"realmDomainComponent": "oraclecloud.com", "realmKey": "oc1", "regionIdentifier": "eu-frankfurt-1",
      "regionKey": "FRA"}),
    ({}, "iad-ad-2", {"realmDomainComponent": "oraclecloud.com", "realmKey": "oc1",
                      "regionIdentifier": "us-ashburn-1", "regionKey": "IAD"}),
    ({"region": "uk-gov-london-1"}, "ltn-ad-1", {"realmDomainComponent": "oraclegovcloud.uk", "realmKey": "oc4",
                                                 "regionIdentifier": "uk-gov-london-1", "regionKey": "LTN"}),
    ({"region": "xx-newcity-1", "region_key": "NWC"}, "x-ad-1",
     {"realmDomainComponent": "oraclecloud.com", "realmKey": "oc1", "regionIdentifier": "xx-newcity-1",
      "regionKey": "NWC"}),
])
def test_region_info_and_time_created(server, settings, zone, info):
    address = new_address()
    server.add(instance_id=f"oci-{address.replace('.', '-')}", hostname="oci", availability_zone=zone,
               addresses=[{"address": address, "network": "default"}], clouds={"oracle": settings},
               created_at="2026-01-02T03:04:05Z")
    doc = server.get("/opc/v2/instance/", address, headers=BEARER).json()
    assert doc["regionInfo"] == info
    assert doc["canonicalRegionName"] == info["regionIdentifier"]
    assert doc["timeCreated"] == 1767323045000  # 2026-01-02T03:04:05Z in milliseconds
    assert server.get("/opc/v2/instance/regionInfo/regionKey", address, headers=BEARER).text == info["regionKey"]


def test_the_table_is_consistent():
    keys = [key for key, _realm in REGIONS.values()]
    assert len(keys) == len(set(keys)) and all(len(k) == 3 and k.isupper() for k in keys)
    assert region_info("eu-frankfurt-1")["regionKey"] == "FRA" and region_info("PHX")["regionIdentifier"] == \
        "us-phoenix-1"


def test_the_table_agrees_with_the_oci_sdks():
    """The oci SDK (PyPI, the dev extra) carries Oracle's region table too: ours says the same."""
    regions = pytest.importorskip("oci.regions_definitions")
    for short, name in regions.REGIONS_SHORT_NAMES.items():
        if name in REGIONS:
            assert REGIONS[name] == (short.upper(), regions.REGION_REALMS[name]), name
    known = set(regions.REGIONS_SHORT_NAMES.values())
    assert known - set(REGIONS) == set() or len(known & set(REGIONS)) >= 60  # a newer SDK may know more
