"""Detection from local facts and the systemd generator's verdict, in temporary roots."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from cloudseed.agent.boot.detect import decide, possible_datasources
from cloudseed.agent.config import load_system_config
from cloudseed.agent.devices import find_devices_by_label
from tests.agent.datasources.netlab import PYTHON, write_tree

NETWORK_ONLY = "datasource_list: [OpenStack, Ec2, None]\n"
# the clouds that DMI alone identifies (test_dmi_facts)
DMI_CLOUDS = ("datasource_list: [OpenStack, CloudSigma, SmartOS, AliYun, Ec2, CloudStack, Exoscale, UpCloud, Vultr, "
              "NWCS, WSL, Scaleway, Akamai, CloudCIX, AltCloud, MAAS, Bigstep, IBMCloud, None]\n")


def cfg_of(target, text=None, cmdline=""):
    if text is not None:
        write_tree(target.top, {"etc/cloudseed/cloud.cfg.d/50-test.cfg": text})
    return load_system_config(target, cmdline)


def wanted_by_multi_user(dropin: str) -> list[str] | None:
    """The units multi-user.target's drop-in (the generator's way to switch the agent on) wants."""
    if not os.path.exists(dropin):
        return None
    with open(dropin) as f:
        return [w for line in f if line.startswith("Wants=") for w in line[len("Wants="):].split()]


def generator(target, cmdline=None):
    if cmdline is not None:
        write_tree(target.top, {"etc/cloudseed/cmdline": cmdline})
    proc = subprocess.run([PYTHON, "-m", "cloudseed", "--root", target.top, "generator", "/run/systemd/generator",
                           "/run/systemd/generator.early", "/run/systemd/generator.late"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    dropin = os.path.join(target.top, "run/systemd/generator/multi-user.target.d/50-cloudseed.conf")
    enabled = os.path.join(target.top, "run/cloudseed/enabled")
    disabled = os.path.join(target.top, "run/cloudseed/disabled")
    return {
        "wants": wanted_by_multi_user(dropin),
        "enabled": json.load(open(enabled)) if os.path.exists(enabled) else None,
        "disabled": open(disabled).read().strip() if os.path.exists(disabled) else None,
    }


def test_nothing_possible_disables_the_agent(target):
    cfg_of(target, NETWORK_ONLY)
    out = generator(target)
    assert out["wants"] is None and out["enabled"] is None
    assert out["disabled"] == "no datasource can exist here (checked OpenStack, Ec2 from datasource_list)"


def test_default_list_on_a_bare_machine(target):
    if find_devices_by_label(["cidata", "CIDATA", "config-2", "CONFIG-2"]):
        pytest.skip("a seed device is attached on this machine right now")
    out = generator(target)
    assert out["wants"] is None, out["enabled"]  # the generator's reason: which device or fact it saw
    assert "checked NoCloud, ConfigDrive, OpenStack, " in out["disabled"] and " Ec2, " in out["disabled"]


def test_openstack_dmi_enables_it(target):
    write_tree(target.top, {"sys/class/dmi/id/product_name": "OpenStack Nova\n"})
    cfg_of(target, NETWORK_ONLY)
    out = generator(target)
    assert out["wants"] == ["cloudseed.target"]
    assert out["enabled"]["datasources"] == [["OpenStack", "DMI product_name is 'OpenStack Nova'"]]
    assert out["disabled"] is None
    # a later boot on a machine where nothing can exist removes the link again
    os.remove(os.path.join(target.top, "sys/class/dmi/id/product_name"))
    out = generator(target)
    assert out["wants"] is None and out["enabled"] is None and out["disabled"]


@pytest.mark.parametrize("facts,expected", [
    ({"sys/class/dmi/id/chassis_asset_tag": "OpenTelekomCloud\n"}, ("OpenStack", "chassis_asset_tag")),
    ({"sys/class/dmi/id/sys_vendor": "Amazon EC2\n"}, ("Ec2", "sys_vendor")),
    ({"sys/class/dmi/id/product_uuid": "ec2abcde-0000\n", "sys/class/dmi/id/product_serial": "EC2ABCDE-0000\n"},
     ("Ec2", "product_uuid")),
    ({"sys/hypervisor/uuid": "ec2aaaaa-1111\n"}, ("Ec2", "Xen")),
    ({"sys/class/dmi/id/chassis_asset_tag": "f2b4.zstack.io\n"}, ("Ec2", "ZStack")),  # as cloud-init 22.4
    ({"sys/class/dmi/id/product_name": "Alibaba Cloud ECS\n"}, ("AliYun", "product_name")),
    ({"sys/class/dmi/id/product_name": "CloudStack KVM Hypervisor\n"}, ("CloudStack", "product_name")),
    ({"sys/class/dmi/id/product_name": "Exoscale Compute Platform\n"}, ("Exoscale", "product_name")),
    ({"sys/class/dmi/id/sys_vendor": "UpCloud\n"}, ("UpCloud", "sys_vendor")),
    ({"sys/class/dmi/id/sys_vendor": "Vultr\n"}, ("Vultr", "sys_vendor")),
    ({"sys/class/dmi/id/sys_vendor": "NWCS\n"}, ("NWCS", "sys_vendor")),
    ({"sys/class/dmi/id/sys_vendor": "Scaleway\n"}, ("Scaleway", "sys_vendor")),
    ({"var/run/scaleway": ""}, ("Scaleway", "/var/run/scaleway")),
    ({"sys/class/dmi/id/sys_vendor": "Linode\n"}, ("Akamai", "sys_vendor")),
    ({"sys/class/dmi/id/sys_vendor": "Akamai\n"}, ("Akamai", "sys_vendor")),
    ({"sys/class/dmi/id/product_name": "CloudCIX\n"}, ("CloudCIX", "product_name")),
    ({"sys/class/dmi/id/product_name": "CloudSigma\n"}, ("CloudSigma", "product_name")),
    ({"sys/class/dmi/id/product_name": "SmartDC HVM\n"}, ("SmartOS", "product_name")),
    ({"proc/sys/kernel/osrelease": "5.15.153.1-microsoft-standard-WSL2\n"}, ("WSL", "kernel release")),
    ({"var/lib/cloud/data/seed/bigstep/url": "http://10.0.0.1/md\n"}, ("Bigstep", "bigstep/url exists")),
    ({"var/lib/cloud/seed/maas/meta-data/instance-id": "node-1\n"}, ("MAAS", "seed directory")),
])
def test_dmi_facts(target, facts, expected):
    write_tree(target.top, facts)
    found = possible_datasources(target, cfg_of(target, DMI_CLOUDS), "")
    assert len(found) == 1 and found[0][0] == expected[0] and expected[1] in found[0][1]


@pytest.mark.parametrize("facts", [
    {"sys/class/dmi/id/chassis_asset_tag": "zstack.io.example\n"},
    {"sys/class/dmi/id/product_name": "Alibaba Cloud\n"},
    {"sys/class/dmi/id/product_name": "Apache CloudStack\n", "sys/class/dmi/id/sys_vendor": "CloudStack\n"},
    {"sys/class/dmi/id/sys_vendor": "Exoscale\n", "sys/class/dmi/id/product_name": "KVM\n"},
    {"sys/class/dmi/id/product_name": "UpCloud\n", "sys/class/dmi/id/sys_vendor": "upcloud\n"},
    {"sys/class/dmi/id/sys_vendor": "Vultr Holdings\n"},
    {"sys/class/dmi/id/sys_vendor": "NWCS Inc\n"},
    {"sys/class/dmi/id/sys_vendor": "Scaleway SAS\n", "var/run/scaleway.d/x": ""},
    {"sys/class/dmi/id/sys_vendor": "Akamai Technologies\n", "sys/class/dmi/id/product_name": "Linode\n"},
    {"sys/class/dmi/id/sys_vendor": "CloudCIX\n", "sys/class/dmi/id/product_name": "CloudCIX VM\n"},
    {"sys/class/dmi/id/sys_vendor": "CloudSigma\n", "sys/class/dmi/id/product_name": "KVM\n"},
    {"sys/class/dmi/id/product_name": "Triton SmartOS\n"},
    {"proc/sys/kernel/osrelease": "6.8.0-1008-azure\n"},
    # AltCloud's RHEV needs a floppy (this host has none), IBMCloud's Xen a labelled disk, MAAS a configuration
    {"sys/class/dmi/id/product_name": "RHEV Hypervisor\n"},
    {"etc/sysconfig/cloud-info": "RHEV\n"},
    {"proc/xen/capabilities": "control_d\n"},
    {"var/lib/cloud/data/seed/bigstep/.keep": ""},
])
def test_dmi_near_misses(target, facts):
    write_tree(target.top, facts)
    assert possible_datasources(target, cfg_of(target, DMI_CLOUDS), "") == []


def test_kernel_command_line_seed_and_list(target):
    cfg = cfg_of(target, "datasource_list: [NoCloud, OpenStack, None]\ndatasource: {NoCloud: {fs_label: null}}\n")
    assert possible_datasources(target, cfg, "quiet") == []
    found = possible_datasources(target, cfg, "ds=nocloud;s=http://10.0.0.1/seed/ quiet")
    assert found == [("NoCloud", "kernel command line has ds=nocloud")]
    # ci.ds= replaces the configured list
    write_tree(target.top, {"sys/class/dmi/id/product_name": "OpenStack Compute\n"})
    assert [n for n, _ in possible_datasources(target, cfg, "")] == ["OpenStack"]
    assert possible_datasources(target, cfg, "ci.ds=Ec2") == []


def test_seed_directory(target):
    write_tree(target.top, {"var/lib/cloud/seed/nocloud/meta-data": "instance-id: i-1\n"})
    cfg = cfg_of(target, "datasource_list: [NoCloud, None]\ndatasource: {NoCloud: {fs_label: null}}\n")
    assert possible_datasources(target, cfg, "") == [("NoCloud", "seed directory /var/lib/cloud/seed/nocloud")]


def test_explicit_configuration_makes_a_network_datasource_possible(target):
    cfg = cfg_of(target, NETWORK_ONLY + "datasource:\n  Ec2: {metadata_urls: ['http://10.1.1.1']}\n")
    assert possible_datasources(target, cfg, "") == [("Ec2", "datasource.Ec2.metadata_urls is configured")]


def test_disabled_markers_win(target):
    write_tree(target.top, {"sys/class/dmi/id/product_name": "OpenStack Nova\n"})
    out = generator(target, cmdline="root=/dev/vda1 cloudseed=disabled")
    assert out["wants"] is None and out["disabled"] == "kernel command line has cloudseed=disabled"
    write_tree(target.top, {"etc/cloudseed/cmdline": "", "etc/cloudseed/disabled": ""})
    out = generator(target)
    assert out["wants"] is None and out["disabled"] == "/etc/cloudseed/disabled exists"


def test_none_policy(target):
    verdict = decide(target, cfg_of(target, "datasource_list: [None]\n"), "")
    assert verdict["enabled"] and verdict["datasources"] == [["None", "datasource_list names only None"]]
    verdict = decide(target, cfg_of(target, NETWORK_ONLY), "")
    assert not verdict["enabled"]
    verdict = decide(target, cfg_of(target, NETWORK_ONLY + "datasource_detection: {notfound: enabled}\n"), "")
    assert verdict["enabled"] and verdict["datasources"][0][0] == "None"


def test_unknown_datasource_is_skipped(target):
    cfg = cfg_of(target, "datasource_list: [Azure, OpenStack, None]\n")
    write_tree(target.top, {"sys/class/dmi/id/product_name": "OpenStack Nova\n"})
    assert [n for n, _ in possible_datasources(target, cfg, "")] == ["OpenStack"]


# cloud-init's own default datasource_list (as Debian ships cloud-init 24.x-26.x)
CLOUD_INIT_DEFAULT_LIST = [
    "NoCloud", "ConfigDrive", "OpenNebula", "DigitalOcean", "Azure", "AltCloud", "VMware", "OVF", "MAAS", "GCE",
    "OpenStack", "CloudSigma", "SmartOS", "Bigstep", "Scaleway", "AliYun", "Ec2", "CloudStack", "Hetzner",
    "IBMCloud", "Oracle", "Exoscale", "RbxCloud", "UpCloud", "Vultr", "LXD", "NWCS", "Akamai", "WSL", "CloudCIX",
    "None"]


def test_every_datasource_of_cloud_inits_default_list_is_in_ours_and_loads():
    from cloudseed.agent.config import BUILTIN
    from cloudseed.agent.datasources import datasource_class

    ours = BUILTIN["datasource_list"]
    assert [name for name in CLOUD_INIT_DEFAULT_LIST if name not in ours] == []
    for name in CLOUD_INIT_DEFAULT_LIST:
        assert datasource_class(name).name == name
