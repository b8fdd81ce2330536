"""The Ec2 datasource's network config against Debian's cloud-init 22.4, on five interface layouts.

Both crawl the very same trees from ``cloudseed serve`` (one listener per layout, each with an
instance at 127.0.0.1 on the listener's network): ours with the agent's crawler and
``network_config_from_macs``, the reference with its own crawler and
``convert_ec2_metadata_network_config``, given the same system NIC names.
"""

from __future__ import annotations

import json

import pytest

from tests.provider.server.server_support import ServerProcess

pytestmark = pytest.mark.reference

M = [f"0a:00:00:00:20:0{i}" for i in range(4)]


def nic(mac: str, address: str, network: str, prefix: int = 24, **extra) -> dict:
    return {"address": address, "network": network, "mac": mac, "prefix": prefix, **extra}


# layout -> (macs in device order, addresses, system NIC names by MAC)
LAYOUTS = {
    "one-nic": ([M[0]], [nic(M[0], "127.0.0.1", "one-nic", 20)], {M[0]: "ens5"}),
    "secondary-ipv4-and-ipv6": (
        [M[0]], [nic(M[0], "127.0.0.1", "secondary-ipv4-and-ipv6", 20),
                 nic(M[0], "127.0.0.9", "secondary-ipv4-and-ipv6-c", 20),
                 nic(M[0], "127.0.0.12", "secondary-ipv4-and-ipv6-b", 20),
                 nic(M[0], "2001:db8::5", "secondary-ipv4-and-ipv6", 64)], {M[0]: "eth0"}),
    "two-nics-ipv6-on-second": (
        [M[0], M[1]], [nic(M[0], "127.0.0.1", "two-nics-ipv6-on-second"),
                       nic(M[1], "10.1.0.5", "two-nics-ipv6-on-second-b"),
                       nic(M[1], "2001:db8:1::5", "two-nics-ipv6-on-second", 64)], {M[0]: "eth0", M[1]: "eth1"}),
    "three-nics-secondaries": (
        [M[0], M[1], M[2]], [nic(M[0], "127.0.0.1", "three-nics-secondaries", 16),
                             nic(M[0], "2001:db8:2::5", "three-nics-secondaries", 64),
                             nic(M[0], "2001:db8:2::6", "three-nics-secondaries-b", 64),
                             nic(M[1], "10.2.1.5", "three-nics-secondaries-b"),
                             nic(M[2], "10.2.2.5", "three-nics-secondaries-c", 26),
                             nic(M[2], "10.2.2.6", "three-nics-secondaries-c", 26),
                             nic(M[2], "198.51.100.7", "three-nics-public", 32, public=True)],
        {M[0]: "ens5", M[1]: "ens6", M[2]: "ens7"}),
    # device order against MAC order, and a system NIC the metadata does not know
    "reversed-with-extra-system-nic": (
        [M[3], M[1]], [nic(M[3], "127.0.0.1", "reversed-with-extra-system-nic"),
                       nic(M[1], "10.3.0.5", "reversed-with-extra-system-nic-b")],
        {M[1]: "eth1", M[3]: "eth0", M[2]: "eth9"}),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ec2-net")
    names = list(LAYOUTS)
    proc = ServerProcess(str(tmp / "server.db"), str(tmp / "server"), [f"127.0.0.1:0={n}" for n in names],
                         config={"rate_limit": 0})
    try:
        for index, name in enumerate(names):
            macs, addresses, _system = LAYOUTS[name]
            proc.add(instance_id=f"i-layout-{index}", hostname=f"layout-{index}", macs=macs, addresses=addresses)
        yield {name: f"http://127.0.0.1:{port}" for name, port in zip(names, proc.ports)}
    finally:
        proc.stop()


REFERENCE = """
import json, sys
from cloudinit.sources.helpers import ec2
from cloudinit.sources import DataSourceEc2 as ds
out = {}
for name, (url, system) in json.loads(sys.argv[1]).items():
    md = ec2.get_instance_metadata("2021-03-23", url)
    out[name] = ds.convert_ec2_metadata_network_config(md["network"], macs_to_nics=system, fallback_nic="eth0")
print(json.dumps(out))
"""


def test_network_config_is_the_references_on_five_layouts(served):
    from cloudseed.agent.datasources._metadata_service import ServiceLimits
    from cloudseed.agent.datasources.ec2 import crawl_tree, network_config_from_macs
    from tests.reference import reference_python

    arg = {name: [url, LAYOUTS[name][2]] for name, url in served.items()}
    proc = reference_python(REFERENCE, json.dumps(arg))
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, url in served.items():
        meta = crawl_tree(url, "2021-03-23/meta-data", ServiceLimits.from_cfg({}))
        ours = network_config_from_macs(meta["network"]["interfaces"]["macs"], system_macs=LAYOUTS[name][2])
        assert ours == theirs[name], name
    # the layouts are what they claim: secondaries, dhcp6 and metrics all appear somewhere
    # served .9 then .12; 22.4 sorts them as text
    assert theirs["secondary-ipv4-and-ipv6"]["ethernets"]["eth0"]["addresses"] == ["127.0.0.12/20", "127.0.0.9/20"]
    assert theirs["three-nics-secondaries"]["ethernets"]["ens5"]["addresses"] == ["2001:db8:2::6/128"]
    assert theirs["two-nics-ipv6-on-second"]["ethernets"]["eth1"]["dhcp6-overrides"] == {"route-metric": 200}
    assert theirs["three-nics-secondaries"]["ethernets"]["ens7"]["addresses"] == ["10.2.2.6/26"]
    assert theirs["reversed-with-extra-system-nic"]["ethernets"]["eth0"]["dhcp4-overrides"] == {"route-metric": 100}
