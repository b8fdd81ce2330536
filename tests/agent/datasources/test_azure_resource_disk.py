"""Azure's resource disk on real loop devices: when the Azure datasource has it reformatted for /mnt.

Each disk is a sparse image with a real partition table (sfdisk) and a real NTFS (mkntfs) holding
files copied in with ntfs-3g's ``ntfscp``, attached with ``losetup``; the datasource is pointed at
it with ``disk_aliases`` (on Azure: ``/dev/disk/cloud/azure_resource``, the udev rule's link). The
verdict is compared with cloud-init 22.4's ``can_dev_be_reformatted`` run on the same device (it
mounts with ``mount -t ntfs``, ntfs-3g's FUSE helper here). Then the real ``disk_setup`` and
``mounts`` modules run on the disk with the config the datasource produced.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from cloudseed.agent.datasources import DatasourceContext
from cloudseed.agent.datasources import _azure_resource_disk as rd
from cloudseed.agent.datasources.azure import Azure
from cloudseed.agent.state import Paths
from cloudseed.core.root import TargetRoot
from tests.reference import reference_python

MIB = 2**20
OVF = """<?xml version="1.0" encoding="utf-8"?>
<ns0:Environment xmlns:ns0="http://schemas.dmtf.org/ovf/environment/1"
 xmlns:ns1="http://schemas.microsoft.com/windowsazure">
<ns1:ProvisioningSection><ns1:Version>1.0</ns1:Version>
<ns1:LinuxProvisioningConfigurationSet>
<ns1:ConfigurationSetType>LinuxProvisioningConfiguration</ns1:ConfigurationSetType>
<ns1:UserName>alice</ns1:UserName><ns1:HostName>disk-host</ns1:HostName>
</ns1:LinuxProvisioningConfigurationSet></ns1:ProvisioningSection>
</ns0:Environment>
"""
WARNING_FILE = "DATALOSS_WARNING_README.txt"
MSR = "E3C9E316-0B5C-4DB8-817D-F92DF00215AE"  # Microsoft reserved (part 1 of disks over 2 TB)
BASIC_DATA = "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7"
LAYOUTS = {  # sfdisk scripts for a 64 MiB disk
    "one": "label: dos\nstart=2048, type=7\n",  # Azure's usual: MBR, one NTFS partition
    "two": f"label: gpt\nstart=2048, size=32768, type={MSR}\nstart=34816, type={BASIC_DATA}\n",
    "three": "label: dos\nstart=2048, size=20480, type=7\nstart=22528, size=20480, type=7\nstart=43008, type=7\n",
}


def _sh(*argv: str, input: str | None = None) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, input=input).stdout


def _blkid(node: str, tag: str) -> str:
    return subprocess.run(["blkid", "-c", "/dev/null", "-p", "-o", "value", "-s", tag, node],
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def resource_disk(tmp_path):
    """A factory of resource disks: make(layout, files, fs="ntfs") -> the loop device; detached afterwards."""
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    for tool in ("losetup", "sfdisk", "partx", "blkid", "mkntfs", "ntfscp", "ntfsls", "mkfs.ext4"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (scripts/setup.sh: ntfs-3g, fdisk, e2fsprogs)")
    made: list[str] = []

    def make(layout: str = "one", files: tuple[str, ...] = (WARNING_FILE,), fs: str = "ntfs",
             directories: tuple[str, ...] = ()) -> str:
        image = tmp_path / f"resource{len(made)}.img"
        with open(image, "wb") as handle:
            handle.truncate(64 * MIB)
        _sh("sfdisk", "-q", str(image), input=LAYOUTS[layout])
        disk = _sh("losetup", "--find", "--show", "--partscan", str(image)).strip()
        made.append(disk)
        count = LAYOUTS[layout].count("start=")
        last = f"{disk}p{count}"
        for attempt in range(50):  # the kernel scans the table asynchronously
            if os.path.exists(last):
                break
            if attempt == 10:
                subprocess.run(["partx", "-a", disk], capture_output=True)
            time.sleep(0.1)
        else:
            pytest.skip("the loop device's partitions did not appear")
        if fs == "ntfs":
            _sh("mkntfs", "-Q", "-q", "-L", "Temporary Storage", last)
            source = tmp_path / "content.txt"
            source.write_text("This is a temporary disk.\n")
            for name in files:
                _sh("ntfscp", last, str(source), name)
            if directories:  # ntfs-3g has no mkdir tool: through its FUSE mount
                top = tmp_path / "ntfs-rw"
                top.mkdir(exist_ok=True)
                _sh("mount", "-t", "ntfs-3g", last, str(top))
                try:
                    for name in directories:
                        (top / name).mkdir()
                finally:
                    _sh("umount", str(top))
        elif fs == "ext4":
            _sh("mkfs.ext4", "-q", last)
        return disk

    yield make
    for disk in made:
        subprocess.run(["losetup", "--detach", disk], capture_output=True)


def reference_verdict(disk: str, preserve: bool = False) -> tuple[bool, str]:
    """cloud-init 22.4's can_dev_be_reformatted on the device."""
    out = reference_python(
        "import json, sys\nfrom cloudinit.sources import DataSourceAzure as A\n"
        "print(json.dumps(A.can_dev_be_reformatted(sys.argv[1], preserve_ntfs=sys.argv[2] == '1')))",
        disk, "1" if preserve else "0")
    ok, message = json.loads(out.stdout.strip().splitlines()[-1])
    return ok, message


def azure(tmp_path, disk: str | None, previous_iid: str | None = None, **settings) -> Azure:
    """The Azure datasource read from a seed directory (no network), its resource disk at ``disk``."""
    top = tmp_path / "root"
    seed = top / "var/lib/cloud/seed/azure"
    seed.mkdir(parents=True, exist_ok=True)
    (seed / "ovf-env.xml").write_text(OVF)
    root = TargetRoot(str(top))
    if previous_iid:
        root.write("/var/lib/cloudseed/data/instance-id", previous_iid + "\n")
    section = {"max_wait": 0, "report_ready": False, **settings}
    if disk:
        section["disk_aliases"] = {"ephemeral0": disk}
    ctx = DatasourceContext(root=root, cfg={"datasource": {"Azure": section}}, cmdline="",
                            paths=Paths(root), stage="network")
    ds = Azure(ctx)
    assert ds.fetch() is True
    return ds


# ---------------------------------------------------------------- safe: the ephemeral config is merged
@pytest.mark.parametrize("layout", ["one", "two"])
def test_fresh_disk_is_reformatted_as_cloud_init_22_4_decides(resource_disk, tmp_path, layout):
    disk = resource_disk(layout)
    verdict = rd.reformat_verdict(disk)
    assert verdict.safe, verdict.reason
    assert f"partition {1 if layout == 'one' else 2} " in verdict.reason and "mounted read-only" in verdict.reason
    ok, message = reference_verdict(disk)
    assert ok is True, message
    ds = azure(tmp_path, disk)
    config = ds.extra["cloud_config"]
    assert config["disk_setup"] == {"ephemeral0": {"table_type": "gpt", "layout": [100], "overwrite": True}}
    assert config["fs_setup"] == [{"filesystem": "ext4", "device": "ephemeral0.1"}]
    assert config["system_info"]["default_user"]["name"] == "alice"  # the OVF's config is still there
    assert ds.metadata["block-device-mapping"] == {"ephemeral0": disk}
    assert ds.warnings == []
    assert _blkid(f"{disk}p1", "TYPE") in ("ntfs", "")  # nothing was written by the decision


def test_ntfsls_reads_the_disk_when_mounting_is_not_possible(resource_disk):
    disk = resource_disk("one", files=(WARNING_FILE, "notes.txt"))
    only_warning = resource_disk("one")
    assert rd.reformat_verdict(only_warning, ways=("ntfsls",)).safe
    refused = rd.reformat_verdict(disk, ways=("ntfsls",))
    assert not refused.safe and "notes.txt" in refused.reason and "(ntfsls)" not in refused.reason


def test_unreadable_ntfs_is_kept_unlike_cloud_init_22_4(resource_disk):
    """Deliberate difference: 22.4 formats an NTFS it cannot mount ("assuming there are no important
    files"); without ntfs3 and ntfs-3g we keep it and name what to install."""
    disk = resource_disk("one")
    verdict = rd.reformat_verdict(disk, ways=())
    assert not verdict.safe and "install ntfs-3g" in verdict.reason and f"{disk}" in verdict.reason


def test_system_volume_information_is_ignored_unlike_cloud_init_22_4(resource_disk):
    """Deliberate difference: Windows' "System Volume Information" is not the user's data; 22.4 counts it."""
    disk = resource_disk("one", directories=("System Volume Information",))
    assert rd.reformat_verdict(disk).safe
    ok, message = reference_verdict(disk)
    assert ok is False and "had 1 files" in message


# ---------------------------------------------------------------- refused: left alone, and said why
def test_user_file_on_the_ntfs_is_refused_with_its_name(resource_disk, tmp_path):
    disk = resource_disk("one", files=(WARNING_FILE, "important.db"))
    ok, message = reference_verdict(disk)
    assert ok is False and "had 1 files" in message
    ds = azure(tmp_path, disk)
    assert "disk_setup" not in ds.extra["cloud_config"] and "fs_setup" not in ds.extra["cloud_config"]
    assert "block-device-mapping" not in ds.metadata  # not ephemeral0: mounts puts nothing on /mnt
    assert len(ds.warnings) == 1 and "important.db" in ds.warnings[0] and disk in ds.warnings[0]
    assert _blkid(f"{disk}p1", "TYPE") == "ntfs"


def test_three_partitions_are_refused(resource_disk, tmp_path):
    disk = resource_disk("three")
    verdict = rd.reformat_verdict(disk)
    assert not verdict.safe and "3 partitions" in verdict.reason and f"{disk}p3" in verdict.reason
    ok, message = reference_verdict(disk)
    assert ok is False and "3 or more partitions" in message
    ds = azure(tmp_path, disk)
    assert "disk_setup" not in ds.extra["cloud_config"] and "3 partitions" in ds.warnings[0]


def test_ext4_already_is_refused(resource_disk, tmp_path):
    disk = resource_disk("one", fs="ext4")
    verdict = rd.reformat_verdict(disk)
    assert not verdict.safe and "is not NTFS (ext4)" in verdict.reason
    ok, message = reference_verdict(disk)
    assert ok is False and "was not ntfs formatted" in message
    assert "disk_setup" not in azure(tmp_path, disk).extra["cloud_config"]


def test_unpartitioned_disk_is_refused(resource_disk, tmp_path):
    disk = resource_disk("one", fs="ntfs")
    subprocess.run(["wipefs", "-a", "-q", disk], check=True, capture_output=True)  # the table goes
    subprocess.run(["partx", "-d", disk], capture_output=True)
    verdict = rd.reformat_verdict(disk)
    assert not verdict.safe and "not partitioned" in verdict.reason
    ok, message = reference_verdict(disk)
    assert ok is False and "was not partitioned" in message


def test_never_destroy_ntfs_is_honoured_without_a_warning(resource_disk, tmp_path):
    disk = resource_disk("one")
    assert not rd.reformat_verdict(disk, preserve_ntfs=True).safe
    ok, message = reference_verdict(disk, preserve=True)
    assert ok is False and "never destroy NTFS" in message
    ds = azure(tmp_path, disk, never_destroy_ntfs=True)
    assert "disk_setup" not in ds.extra["cloud_config"] and ds.warnings == []  # the user asked: not degraded
    assert "disk_setup" not in azure(tmp_path, disk, never_destroy_ntfs="true").extra["cloud_config"]


def test_no_resource_disk_merges_nothing(tmp_path):
    started = time.monotonic()
    ds = azure(tmp_path, str(tmp_path / "no-such-disk"))
    assert "disk_setup" not in ds.extra["cloud_config"] and "block-device-mapping" not in ds.metadata
    assert ds.warnings == [] and time.monotonic() - started < 2
    if not os.path.exists(rd.RESOURCE_DISK):  # the default link (udev's), absent on this host
        ds = azure(tmp_path, None)
        assert "disk_setup" not in ds.extra["cloud_config"] and ds.warnings == []


def test_hostile_ntfs_boot_sector_is_refused_in_bounded_time(resource_disk, tmp_path):
    """An NTFS boot sector over garbage: mount and ntfsls both fail; a clear reason, no crash, no hang."""
    disk = resource_disk("one", fs="none")
    sector = bytearray(os.urandom(512))
    sector[3:11] = b"NTFS    "
    sector[510:512] = b"\x55\xaa"
    with open(f"{disk}p1", "r+b") as handle:
        handle.write(bytes(sector) + os.urandom(MIB))
    started = time.monotonic()
    verdict = rd.reformat_verdict(disk)
    assert time.monotonic() - started < 2 * rd.TIMEOUT
    assert not verdict.safe and "could not be listed" in verdict.reason and f"{disk}p1" in verdict.reason
    ok, message = reference_verdict(disk)
    assert ok is False and "was not ntfs formatted" in message  # 22.4 keeps it too: blkid sees no NTFS
    ds = azure(tmp_path, disk)
    assert "disk_setup" not in ds.extra["cloud_config"] and "could not be listed" in ds.warnings[0]


# ---------------------------------------------------------------- the same instance on a later boot
def test_same_instance_with_a_fresh_disk_runs_disk_setup_and_mounts_again(resource_disk, tmp_path):
    """As 22.4's address_ephemeral_resize: after a resize or redeploy the disk is NTFS again."""
    disk = resource_disk("one")
    sem = tmp_path / "root/var/lib/cloudseed/instances/iid-azure/sem"
    sem.mkdir(parents=True)
    for name in ("disk_setup", "mounts", "users_groups"):
        (sem / name).write_text("1\n")
    ds = azure(tmp_path, disk, previous_iid="iid-azure")
    assert "disk_setup" in ds.extra["cloud_config"]
    assert sorted(os.listdir(sem)) == ["users_groups"]


def test_same_instance_with_its_ext4_keeps_ephemeral0_quietly(resource_disk, tmp_path):
    disk = resource_disk("one", fs="ext4")
    ds = azure(tmp_path, disk, previous_iid="iid-azure")
    assert ds.metadata["block-device-mapping"] == {"ephemeral0": disk}  # still mounted on /mnt by mounts
    assert "disk_setup" not in ds.extra["cloud_config"] and ds.warnings == []


def test_same_instance_with_a_disk_we_did_not_make_maps_nothing(resource_disk, tmp_path):
    disk = resource_disk("three")
    ds = azure(tmp_path, disk, previous_iid="iid-azure")
    assert "block-device-mapping" not in ds.metadata and "disk_setup" not in ds.extra["cloud_config"]
    assert ds.warnings == []  # said on the instance's first boot


def _reboot_of_the_same_instance(tmp_path, disk: str, first_boot_disk: str):
    """Boot 1 (fetch, adopt) with ``first_boot_disk``; boot 2 reuses the cache with ``disk`` attached."""
    from cloudseed.agent.boot.boot_state import BootState
    from cloudseed.agent.boot.instances import adopt, same_instance_as_last_boot

    def settings(path: str) -> str:
        return ("datasource:\n  Azure:\n    max_wait: 0\n    report_ready: false\n"
                f"    disk_aliases: {{ephemeral0: {path}}}\n")

    top = tmp_path / "root"
    (top / "sys/class/dmi/id").mkdir(parents=True)
    (top / "sys/class/dmi/id/product_uuid").write_text("iid-azure\n")  # as Azure: the vmId
    (top / "etc/cloud").mkdir(parents=True)
    (top / "etc/cloud/cloud.cfg").write_text(settings(first_boot_disk))
    root = TargetRoot(str(top))
    ds = azure(tmp_path, first_boot_disk)
    state = BootState.load(root)
    assert adopt(state, ds) is True
    sem = top / "var/lib/cloudseed/instances/iid-azure/sem"
    for name in ("disk_setup", "mounts", "users_groups"):
        (sem / name).write_text("1\n")
    root.remove(state.paths.boot_datasource_file)  # the reboot: /run is empty
    (top / "etc/cloud/cloud.cfg").write_text(settings(disk))
    state = BootState.load(root)
    again = same_instance_as_last_boot(state)
    assert again is not None and again.instance_id == "iid-azure"
    return again, sorted(os.listdir(sem))


def test_cached_reboot_with_a_fresh_disk_reruns_disk_setup_and_mounts(resource_disk, tmp_path):
    """A resize or redeploy of a Gen2 VM: DMI says same instance, no fetch; the disk is NTFS again."""
    fresh = resource_disk("one")
    ds, sems = _reboot_of_the_same_instance(tmp_path, fresh, first_boot_disk=str(tmp_path / "gone"))
    assert sems == ["users_groups"]
    assert "disk_setup" in ds.extra["cloud_config"] and ds.metadata["block-device-mapping"] == {"ephemeral0": fresh}


def test_cached_reboot_with_our_ext4_touches_nothing(resource_disk, tmp_path):
    ours = resource_disk("one", fs="ext4")
    started = time.monotonic()
    ds, sems = _reboot_of_the_same_instance(tmp_path, ours, first_boot_disk=ours)
    assert sems == ["disk_setup", "mounts", "users_groups"] and ds.warnings == []
    assert time.monotonic() - started < 10


# ---------------------------------------------------------------- the modules with that config
def test_disk_setup_and_mounts_make_ext4_and_the_mnt_line(resource_disk, tmp_path, target):
    from cloudseed.agent.modules import ModuleContext, run_module

    if not shutil.which("sgdisk"):
        pytest.skip("sgdisk is not installed (scripts/setup.sh: gdisk)")
    disk = resource_disk("one")
    ds = azure(tmp_path, disk)
    cfg = dict(ds.extra["cloud_config"])

    def run(root: TargetRoot, module: str):
        state = target if root.is_live else root  # semaphores never in the host's /var/lib/cloudseed
        ctx = ModuleContext(root=root, paths=Paths(state), cfg=cfg, instance_id="iid-azure", stage="init",
                            datasource=ds, instance_data={})
        return run_module(ctx, module, force=True)

    result = run(TargetRoot("/"), "disk_setup")  # the machine's own /dev, as at boot
    assert result.status == "ok", result.reason
    assert not os.path.exists("/var/lib/cloudseed/instances/iid-azure")  # its semaphore is in the target
    table = json.loads(_sh("sfdisk", "--json", disk))["partitiontable"]
    assert table["label"] == "gpt" and len(table["partitions"]) == 1
    assert _blkid(f"{disk}p1", "TYPE") == "ext4"
    assert rd.reformat_verdict(disk).reason.endswith("is not NTFS (ext4)")  # never again
    target.write("/lib/systemd/systemd", "")  # a systemd image: the options name our network stage
    result = run(target, "mounts")
    assert result.status == "ok", result.reason
    lines = [line.split() for line in target.read_text("/etc/fstab").splitlines()]
    assert [f"{disk}p1", "/mnt", "auto"] in [fields[:3] for fields in lines], lines
    mnt = next(fields for fields in lines if fields[1] == "/mnt")
    # cloud-init writes x-systemd.requires=cloud-init.service: ours is the network stage's unit
    assert mnt[3] == "defaults,nofail,x-systemd.requires=cloudseed-network.service,_netdev,comment=cloudconfig"
    assert mnt[4:] == ["0", "2"]


# ---------------------------------------------------------------- the udev rule
def test_install_ships_the_udev_rule_for_the_resource_disk_link(tmp_path):
    from cloudseed.commands.install import UDEV_RULES_DIR, install_units

    root = TargetRoot(str(tmp_path))
    written = install_units(root)
    rule = f"{UDEV_RULES_DIR}/66-cloudseed-azure-ephemeral.rules"
    assert root.path(rule) in written or rule in written
    text = root.read_text(rule)
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert 'SYMLINK+="disk/cloud/$env{CLOUDSEED_AZURE_DISK}-part%n"' in text
    assert any('"?00000000-0001-*"' in line and '"azure_resource"' in line for line in lines)
    assert any('KERNELS=="*:*:*:1"' in line and '"azure_resource"' in line for line in lines)
    labels = {line.split('"')[1] for line in lines if line.startswith("LABEL=")}
    gotos = {part.split('"')[1] for line in lines for part in line.split(", ") if part.startswith("GOTO=")}
    assert gotos <= labels  # every jump has its label
    assert rd.RESOURCE_DISK == "/dev/disk/cloud/azure_resource"


def test_udev_parses_the_rule_without_complaint(tmp_path):
    """systemd-udev's own parser (``udevadm test``) reads the rule from a private /etc/udev/rules.d
    (a tmpfs in a mount namespace of its own: the host's rules are untouched); a broken copy shows
    that it would complain."""
    if os.geteuid() != 0 or not shutil.which("udevadm") or not shutil.which("unshare"):
        pytest.skip("needs root, udevadm and unshare")
    source = os.path.join(os.path.dirname(rd.__file__), "..", "..", "data", "udev",
                          "66-cloudseed-azure-ephemeral.rules")
    with open(source) as handle:
        good = handle.read()
    broken = good.replace('GOTO="cloudseed_azure_gen2"', 'GOTO="nowhere"', 1)
    image = tmp_path / "probe.img"
    with open(image, "wb") as handle:
        handle.truncate(MIB)
    disk = _sh("losetup", "--find", "--show", str(image)).strip()
    try:
        outputs = []
        for text in (good, broken):
            (tmp_path / "66-probe.rules").write_text(text)
            script = (f"mount --make-rprivate / && mkdir -p /etc/udev/rules.d && "
                      f"mount -t tmpfs tmpfs /etc/udev/rules.d && cp {tmp_path}/66-probe.rules /etc/udev/rules.d/ && "
                      f"udevadm test --action=add /sys/class/block/{os.path.basename(disk)}")
            proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)
            outputs.append([line for line in (proc.stdout + proc.stderr).splitlines() if "66-probe.rules" in line])
    finally:
        subprocess.run(["losetup", "--detach", disk], capture_output=True)
    good_lines, broken_lines = outputs
    if not any("Reading rules file" in line for line in good_lines):
        pytest.skip("udevadm test did not read /etc/udev/rules.d here")
    assert [line for line in good_lines if "Reading rules file" not in line] == [], good_lines
    assert any("no matching label" in line for line in broken_lines), broken_lines
