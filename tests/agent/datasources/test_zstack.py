"""ZStack: an EC2-compatible cloud the Ec2 datasource identifies from its chassis asset tag
(``*.zstack.io``), compared with cloud-init 22.4's own identification (``identify_platform``)
over the same DMI facts: the same verdict, and the same ``cloud_name``.
"""

from __future__ import annotations

import json

import pytest

from cloudseed.agent.datasources import DatasourceContext
from cloudseed.agent.datasources.ec2 import Ec2
from cloudseed.agent.state import Paths
from tests.agent.datasources.netlab import write_tree
from tests.reference import reference_python, reference_tree

CASES = [
    {"chassis_asset_tag": "5f1e9c.zstack.io"},
    {"chassis_asset_tag": "VM-1.ZStack.io"},  # 22.4 lowercases the tag before comparing
    {"chassis_asset_tag": "zstack.io.example.com"},  # near miss
    {"chassis_asset_tag": "zstack.io"},  # no dot before: not a ZStack tag
    {"chassis_asset_tag": "abc.zstack.io", "sys_vendor": "Amazon EC2"},
    {"product_serial": "srv-1.gb1.brightbox.com"},
    {},
]

REFERENCE = """
import json, sys
from unittest import mock
from cloudinit.sources import DataSourceEc2 as ec2
facts = json.loads(sys.argv[1])
keys = {"system-uuid": "product_uuid", "system-serial-number": "product_serial",
        "chassis-asset-tag": "chassis_asset_tag", "system-manufacturer": "sys_vendor",
        "system-product-name": "product_name"}
with mock.patch("cloudinit.dmi.read_dmi_data", lambda key: facts.get(keys.get(key, key), "")), \\
     mock.patch("cloudinit.util.load_file", side_effect=IOError("no /sys/hypervisor/uuid")):
    print(json.dumps(ec2.identify_platform()))
"""


@pytest.mark.reference
@pytest.mark.parametrize("facts", CASES)
def test_identification_matches_cloud_init_22_4(target, facts):
    if reference_tree() is None:
        pytest.skip("Debian's cloud-init could not be fetched")
    write_tree(target.top, {f"sys/class/dmi/id/{k}": v + "\n" for k, v in facts.items()})
    ctx = DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage="network")
    theirs = json.loads(reference_python(REFERENCE, json.dumps(facts)).stdout.strip())
    ours_found = Ec2.why(ctx) is not None
    assert ours_found == (theirs != "unknown"), (facts, theirs)
    if ours_found:
        assert Ec2(ctx).cloud_name == theirs


def test_zstack_is_named_in_the_reason(target):
    write_tree(target.top, {"sys/class/dmi/id/chassis_asset_tag": "5f1e9c.zstack.io\n"})
    ctx = DatasourceContext(root=target, cfg={}, cmdline="", paths=Paths(target), stage="network")
    assert Ec2.why(ctx) == "DMI chassis_asset_tag is a ZStack one"
    assert Ec2(ctx).cloud_name == "zstack"
