"""Differential: fstab lines, partition tables, filesystems, NTP and rsyslog files vs Debian's cloud-init 22.4.

The reference's own module code runs with Debian's python3 (``tests/reference.py``):
- mounts: ``cc_mounts.handle`` with its fstab path pointed at a temporary file, commands recorded
  instead of run, directories not created, and a cloud whose block-device mapping is the document's;
- disk_setup/fs_setup: ``cc_disk_setup.mkpart`` and ``mkfs`` on a loop device of the same size
  as ours (real sfdisk, sgdisk, mkfs), compared with ``sfdisk --json`` and ``blkid``;
- ntp: its client table for the distro and ``write_ntp_config_template`` with its own template
  files, as its handler does;
- rsyslog: ``load_config`` and ``apply_rsyslog_changes`` into a temporary directory.
Deliberate differences, each named in the test name and the comment where it is compared:
our mount options require ``cloudseed-network.service`` (the reference names cloud-init.service,
which does not exist on a cloudseed system); a short name for a device that is not there becomes
``/dev/NAME`` (the reference writes the bare name, which mount cannot use); MBR partitions start
at the 1 MiB boundary with sizes rounded by sfdisk to it (compared within 1 MiB); comment lines
of NTP configurations are our own.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from tests.agent.modules.blank_disks import blkid, dump, host
from tests.agent.modules.module_support import InputDatasource, run
from tests.reference import reference_python, reference_tree

pytestmark = pytest.mark.reference

MIB = 2**20

REF_MOUNTS = """
import json, sys, os, logging
from cloudinit.config import cc_mounts
from cloudinit import subp, util
args = json.loads(sys.argv[1])
cc_mounts.FSTAB_PATH = args["fstab"]
ran = []
subp.subp = lambda cmd, *a, **k: ran.append(cmd) or ("", "")
cc_mounts.subp.subp = subp.subp
util.ensure_dir = lambda *a, **k: None
class Distro:
    def uses_systemd(self): return args.get("systemd", True)
class Cloud:
    distro = Distro()
    def device_name_to_device(self, name):
        found = args.get("bdm", {}).get(name)
        if not found: return None
        found = found if found.startswith("/") else "/dev/" + found
        return found if os.path.exists(found) else None
cc_mounts.handle("mounts", args["cfg"], Cloud(), logging.getLogger(), [])
print(json.dumps(ran))
"""


def ref_fstab(tmp_path, cfg: dict, existing: str, bdm: dict | None = None) -> str:
    path = tmp_path / "ref-fstab"
    path.write_text(existing)
    reference_python(REF_MOUNTS, json.dumps({"fstab": str(path), "cfg": cfg, "bdm": bdm or {}}))
    return path.read_text()


def our_fstab(target, cfg: dict, existing: str, bdm: dict | None = None) -> str:
    os.makedirs(target.path("/lib/systemd"), exist_ok=True)  # a systemd image, as the reference assumes
    open(target.path("/lib/systemd/systemd"), "w").close()
    target.write("/etc/fstab", existing)
    result, _ = run(target, "mounts", json.loads(json.dumps(cfg)),
                    datasource=InputDatasource(metadata={"block-device-mapping": bdm or {}}), stage="init")
    assert result.status == "ok", result.reason
    return target.read_text("/etc/fstab")


def lines(text: str) -> list[list[str]]:
    """fstab lines as fields; the reference's unit name mapped to ours (a deliberate difference)."""
    return [line.replace("cloud-init.service", "cloudseed-network.service").split() for line in text.splitlines()]


IMAGE = "UUID=0a1b / ext4 errors=remount-ro 0 1\n# keep me\n"
MOUNT_DOCS = {
    "label-and-defaults": ({"mounts": [["LABEL=data", "/srv"]]}, IMAGE),
    "network-and-full-fields": ({"mounts": [["nfs.example:/export", "/nfs", "nfs", "rw,hard", "0", "0"]]}, IMAGE),
    "default-fields": ({"mounts": [["LABEL=a", "/a"], ["LABEL=b", "/b", "xfs"]],
                        "mount_default_fields": [None, None, "ext4", "noatime", "0", "0"]}, IMAGE),
    "old-lines-replaced": ({"mounts": [["LABEL=new", "/new"]]},
                           IMAGE + "LABEL=old\t/old\tauto\tdefaults,comment=cloudconfig\t0\t2\n"),
    "removal-entry": ({"mounts": [["LABEL=r", "/r"], ["LABEL=r"], ["LABEL=s", "/s"]]}, IMAGE),
    "tmpfs": ({"mounts": [["tmpfs", "/run/scratch", "tmpfs", "size=64m,mode=1777", "0", "0"]]}, IMAGE),
    "empty-fstab": ({"mounts": [["LABEL=e", "/e", "ext4"]]}, ""),
    "nothing-to-do": ({"mounts": []}, IMAGE + "LABEL=old\t/old\tauto\tdefaults,comment=cloudconfig\t0\t2\n"),
}


@pytest.mark.parametrize("name", sorted(MOUNT_DOCS))
def test_fstab_matches(target, tmp_path, name):
    cfg, existing = MOUNT_DOCS[name]
    assert lines(our_fstab(target, cfg, existing)) == lines(ref_fstab(tmp_path, cfg, existing))


def test_fstab_block_device_mapping_matches(target, tmp_path, loop_disk):  # noqa: F811
    ephemeral, swap = loop_disk(8), loop_disk(8)
    bdm = {"ami": "/dev/cloudseed-no-root", "ephemeral0": ephemeral, "swap": swap}
    for cfg in ({}, {"mounts": [["ephemeral0", "/data", "ext4"]]}, {"mounts": [["swap"]]}):
        ours = our_fstab(target, {"mounts": [], **cfg}, IMAGE, bdm)
        theirs = ref_fstab(tmp_path, {"mounts": [], **cfg}, IMAGE, bdm)
        assert lines(ours) == lines(theirs), cfg


def test_fstab_numbers_unquoted_match(target, tmp_path, loop_disk):  # noqa: F811
    disk = loop_disk(8)
    cfg = {"mounts": [[disk, "/n", "ext4", "defaults", 0, 0]]}
    assert lines(our_fstab(target, cfg, IMAGE)) == lines(ref_fstab(tmp_path, cfg, IMAGE))


def test_fstab_device_the_image_names_differs_deliberately(target, tmp_path):
    """An fs_spec the image's fstab already has: the reference adds a second line for it anyway (its
    'already defined' check only skips the renaming); we leave that device to the image's line."""
    cfg = {"mounts": [["UUID=0a1b", "/again"], ["LABEL=z", "/z"]]}
    theirs = lines(ref_fstab(tmp_path, cfg, IMAGE))
    ours = lines(our_fstab(target, cfg, IMAGE))
    assert [f[0] for f in theirs] == ["UUID=0a1b", "#", "UUID=0a1b", "LABEL=z"]
    assert ours == [theirs[0], theirs[1], theirs[3]]


def test_fstab_missing_short_name_differs_deliberately(target, tmp_path):
    """The reference writes the bare 'sdz' (mount cannot use it); we write /dev/sdz (nofail: it may come later)."""
    cfg = {"mounts": [["sdz", "/later"]]}
    theirs = lines(ref_fstab(tmp_path, cfg, IMAGE))
    ours = lines(our_fstab(target, cfg, IMAGE))
    assert theirs[-1][0] == "sdz" and ours[-1][0] == "/dev/sdz"
    assert theirs[-1][1:] == ours[-1][1:]


def test_swap_auto_size_rule_matches():
    from cloudseed.agent.modules._swapfile import GIB, suggested_size

    MI = MIB

    cases = [(512 * MI, None, None), (2 * GIB, None, None), (6 * GIB, None, None), (20 * GIB, None, None),
             (64 * GIB, None, None), (2 * GIB, 256 * MI, None), (8 * GIB, None, 10 * GIB),
             (8 * GIB, 16 * GIB, 10 * GIB), (1 * GIB, None, 100 * GIB)]
    code = ("import json, sys, os\nfrom cloudinit.config import cc_mounts\n"
            "os.statvfs = lambda p: type('V', (), {'f_frsize': 1, 'f_bfree': int(p)})()\n"
            "print(json.dumps([cc_mounts.suggested_swapsize(memsize=m, maxsize=x, fsys=None if f is None else str(f))"
            " for m, x, f in json.loads(sys.argv[1])]))")
    theirs = json.loads(reference_python(code, json.dumps(cases)).stdout)
    assert [suggested_size(m, x, f) for m, x, f in cases] == theirs


# ----------------------------------------------------------------------------------------------- disks
REF_MKPART = """
import json, sys
from cloudinit.config import cc_disk_setup
args = json.loads(sys.argv[1])
listed = cc_disk_setup.enumerate_disk
def probed(node, tag):
    import subprocess
    return subprocess.run(["blkid", "-c", "/dev/null", "-p", "-o", "value", "-s", tag, node],
                          capture_output=True, text=True).stdout.strip()
def as_disk(device, nodeps=False):  # lsblk calls a loop device 'loop'; here it stands for a disk
    for entry in listed(device, nodeps):
        if entry.get("type") == "loop":
            entry["type"] = "disk"
        # lsblk takes FSTYPE and LABEL from udev's database, which no udev daemon keeps here: blkid
        # reads what udev would have recorded
        entry["fstype"] = probed("/dev/" + entry["name"], "TYPE")
        entry["label"] = probed("/dev/" + entry["name"], "LABEL")
        yield entry
cc_disk_setup.enumerate_disk = as_disk
if "definition" in args:
    cc_disk_setup.mkpart(args["device"], args["definition"])
    # this machine's kernel does not re-scan a loop device's table on the reference's BLKRRPART
    # (blockdev --rereadpt); partx adds the partitions, as our module's own settle step does
    import os, subprocess, time
    subprocess.run(["partx", "--update", args["device"]], capture_output=True)
    name = os.path.basename(args["device"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not os.path.exists(f"/sys/class/block/{name}/{name}p1"):
        time.sleep(0.1)
for fs in args.get("fs", []):
    cc_disk_setup.mkfs(fs)
"""

LAYOUTS = {
    "mbr-thirds-with-swap": {"table_type": "mbr", "layout": [33, [66, 82]]},
    "gpt-true": {"table_type": "gpt", "layout": True},
    "gpt-swap-first": {"table_type": "gpt", "layout": [[50, 82], 50]},
    "gpt-three": {"table_type": "gpt", "layout": [25, 25, 50]},
}


def comparable(table: dict) -> tuple[str, list[tuple[str, int]]]:
    return table["label"], [(p["type"], p["size"]) for p in table["partitions"]]


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_partition_table_matches(loop_disk, name):  # noqa: F811
    theirs_disk, ours_disk = loop_disk(64), loop_disk(64)
    reference_python(REF_MKPART, json.dumps({"device": theirs_disk, "definition": dict(LAYOUTS[name])}))
    result, _ = run(host(), "disk_setup", {"disk_setup": {ours_disk: dict(LAYOUTS[name])}}, stage="init")
    assert result.status == "ok", result.reason
    (their_label, theirs), (our_label, ours) = comparable(dump(theirs_disk)), comparable(dump(ours_disk))
    assert our_label == their_label and [t for t, _ in ours] == [t for t, _ in theirs]
    for (_, their_size), (_, our_size) in zip(theirs, ours):
        assert abs(their_size - our_size) <= 2048, (theirs, ours)  # 1 MiB: alignment of sfdisk's defaults


FS_DOCS = {
    "auto-two-filesystems": ({"table_type": "mbr", "layout": [50, 50]},
                             [{"device": "DISK", "partition": "auto", "filesystem": "ext4", "label": "a"},
                              {"device": "DISK", "partition": "auto", "filesystem": "ext4", "label": "b"}]),
    "gpt-auto-swap-and-ext4": ({"table_type": "gpt", "layout": [[40, 82], 60]},
                               [{"device": "DISK", "partition": "auto", "filesystem": "swap", "label": "sw"},
                                {"device": "DISK", "partition": "auto", "filesystem": "ext4", "label": "data"}]),
    "any-reuses-nothing-on-a-blank-disk": (None, [{"device": "DISK", "partition": "any", "filesystem": "ext4"}]),
    "raw-disk-none": (None, [{"device": "DISK", "partition": "none", "filesystem": "ext4", "label": "raw"}]),
}


def blkid_facts(disk: str) -> list[tuple[str, str, str]]:
    nodes = [disk] + [f"{disk}p{n}" for n in range(1, 5) if os.path.exists(f"{disk}p{n}")]
    return [(os.path.basename(n)[len(os.path.basename(disk)):], blkid(n, "TYPE"), blkid(n, "LABEL")) for n in nodes]


@pytest.mark.parametrize("name", sorted(FS_DOCS))
def test_filesystems_match(loop_disk, name):  # noqa: F811
    layout, filesystems = FS_DOCS[name]
    theirs_disk, ours_disk = loop_disk(64), loop_disk(64)

    def fill(disk):
        return [dict(fs, device=disk) for fs in filesystems]

    ref_args = {"device": theirs_disk, "fs": fill(theirs_disk)}
    if layout:
        ref_args["definition"] = dict(layout)
    reference_python(REF_MKPART, json.dumps(ref_args))
    cfg = {"fs_setup": fill(ours_disk)}
    if layout:
        cfg["disk_setup"] = {ours_disk: dict(layout)}
    result, _ = run(host(), "disk_setup", cfg, stage="init")
    assert result.status == "ok", result.reason
    assert blkid_facts(ours_disk) == blkid_facts(theirs_disk)


def test_mbr_layout_true_differs_deliberately(loop_disk):  # noqa: F811
    """``layout: true`` on MBR: the reference's sfdisk script ('0,') is refused by util-linux 2.38
    ('Start sector 0 out of range'); we write one partition over the disk."""
    theirs_disk, ours_disk = loop_disk(32), loop_disk(32)
    proc = reference_python(REF_MKPART, json.dumps({"device": theirs_disk, "definition": {"layout": True}}),
                            check=False)
    assert proc.returncode != 0 and "out of range" in proc.stderr
    result, _ = run(host(), "disk_setup", {"disk_setup": {ours_disk: {"layout": True}}}, stage="init")
    assert result.status == "ok", result.reason
    table = dump(ours_disk)
    assert table["label"] == "dos" and [p["type"] for p in table["partitions"]] == ["83"]


def test_numbered_partition_of_a_p_named_disk_differs_deliberately(loop_disk):  # noqa: F811
    """``partition: 2`` on a disk whose partitions are named ``<disk>p2`` (loop, nvme, mmcblk): the
    reference formats ``<disk>2``, which does not exist; we format ``<disk>p2``."""
    theirs_disk, ours_disk = loop_disk(32), loop_disk(32)
    layout = {"table_type": "gpt", "layout": [50, 50]}
    proc = reference_python(REF_MKPART, json.dumps({"device": theirs_disk, "definition": layout, "fs": [
        {"device": theirs_disk, "partition": 2, "filesystem": "ext4", "label": "two"}]}), check=False)
    assert proc.returncode != 0 and f"{theirs_disk}2" in proc.stderr
    result, _ = run(host(), "disk_setup", {"disk_setup": {ours_disk: layout}, "fs_setup": [
        {"device": ours_disk, "partition": 2, "filesystem": "ext4", "label": "two"}]}, stage="init")
    assert result.status == "ok", result.reason
    assert blkid(f"{ours_disk}p2", "LABEL") == "two"


# ----------------------------------------------------------------------------------------------- ntp
REF_NTP = """
import json, sys, os
from cloudinit.config import cc_ntp
args = json.loads(sys.argv[1])
spec = cc_ntp.distro_ntp_client_configs(args["distro"])[args["client"]]
name = spec["template_name"].replace("{distro}", args["distro"])
cc_ntp.write_ntp_config_template(args["distro"], service_name=spec["service_name"], servers=args["servers"],
    pools=args["pools"], path=args["out"], template_fn=os.path.join(args["templates"], name + ".tmpl"))
print(json.dumps({"confpath": spec["confpath"], "service_name": spec["service_name"]}))
"""

NTP_DOCS = {
    "chrony-debian-servers": ("debian", "chrony", {"servers": ["ntp1.example.com", "192.0.2.1"]}),
    "chrony-debian-pools": ("debian", "chrony", {"pools": ["0.pool.example", "1.pool.example"]}),
    "chrony-debian-both": ("debian", "chrony", {"servers": ["s.example"], "pools": ["p.example"]}),
    "chrony-debian-defaults": ("debian", "chrony", {}),
    "chrony-rhel-servers": ("rhel", "chrony", {"servers": ["time.example.org"]}),
    "chrony-rhel-defaults": ("rhel", "chrony", {}),
    "ntp-debian-both": ("debian", "ntp", {"servers": ["s.example"], "pools": ["p.example"]}),
    "ntp-rhel-servers": ("rhel", "ntp", {"servers": ["a.example", "b.example"]}),
    "timesyncd-debian": ("debian", "systemd-timesyncd", {"servers": ["a.example"], "pools": ["b.example"]}),
    "timesyncd-debian-defaults": ("debian", "systemd-timesyncd", {}),
}


def directives(text: str) -> list[list[str]]:
    """Configuration lines as tokens: comments and blank lines are prose (ours differs deliberately)."""
    return [line.split() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("name", sorted(NTP_DOCS))
def test_ntp_configuration_matches(request, tmp_path, name):
    distro, client, hosts = NTP_DOCS[name]
    tree = reference_tree() or pytest.skip("reference unavailable")
    out = tmp_path / "ref.conf"
    facts = json.loads(reference_python(REF_NTP, json.dumps({
        "distro": distro, "client": client, "servers": hosts.get("servers", []), "pools": hosts.get("pools", []),
        "out": str(out), "templates": os.path.join(tree, "etc/cloud/templates")})).stdout)
    root = request.getfixturevalue("rhel_target" if distro == "rhel" else "target")
    if distro == "rhel":  # the reference's pools are named after distro 'rhel'; ours after os-release ID
        root.write("/etc/os-release", 'ID="rhel"\nID_LIKE="fedora"\nVERSION_ID="9.3"\n')
    result, _ = run(root, "ntp", {"ntp": dict(hosts, ntp_client=client)})
    assert result.status in ("ok", "failed"), result.reason  # failed: the client is not installed in the root
    if client == "systemd-timesyncd":
        # file name: ours is cloudseed.conf in the same drop-in directory (cloud-init.conf in the reference)
        assert os.path.dirname(facts["confpath"]) == "/etc/systemd/timesyncd.conf.d"
        ours = root.read_text("/etc/systemd/timesyncd.conf.d/cloudseed.conf")
    else:
        assert root.exists(facts["confpath"]), facts
        ours = root.read_text(facts["confpath"])
    assert directives(ours) == directives(out.read_text())
    from cloudseed.agent.modules.ntp import client_table

    assert client_table(distro)[client]["service_name"] == facts["service_name"]


# ----------------------------------------------------------------------------------------------- rsyslog
REF_RSYSLOG = """
import json, sys
from cloudinit.config import cc_rsyslog
args = json.loads(sys.argv[1])
cfg = cc_rsyslog.load_config(args["cfg"])
configs = cfg["configs"]
if cfg["remotes"]:
    configs.append(cc_rsyslog.remotes_to_rsyslog_cfg(cfg["remotes"], header="# begin remotes",
                                                     footer="# end remotes"))
print(json.dumps(cc_rsyslog.apply_rsyslog_changes(configs, cfg["config_filename"], args["dir"])))
"""

RSYSLOG_DOCS = {
    "remotes-udp-tcp-ports": {"rsyslog": {"remotes": {"maas": "192.168.1.1", "juju": "@@10.0.4.1:5514"}}},
    "remotes-ipv6-and-filter": {"rsyslog": {"remotes": {"v6": "*.err @[fd00::1]:514", "off": ""}}},
    "remotes-comment-name": {"rsyslog": {"remotes": {"c": "@@logs.example.com # central"}}},
    "configs-strings": {"rsyslog": {"configs": ["*.* @@192.0.2.1", "local0.* /var/log/l0.log\n"]}},
    "configs-files": {"rsyslog": {"config_filename": "99-late.conf", "configs": [
        {"content": "*.* @@192.0.2.2:10514", "filename": "01-example.conf"}, "mail.* /var/log/m.log",
        {"content": "user.* /var/log/u.log", "filename": "01-example.conf"}]}},
    "configs-and-remotes": {"rsyslog": {"configs": ["*.info /var/log/i.log"], "remotes": {"r": "10.9.9.9"}}},
    "legacy-list": {"rsyslog": ["*.* @@10.1.1.1", {"content": "x.* /var/log/x", "filename": "x.conf"}],
                    "rsyslog_filename": "50-legacy.conf"},
}


@pytest.mark.parametrize("name", sorted(RSYSLOG_DOCS))
def test_rsyslog_files_match(target, tmp_path, name):
    cfg = RSYSLOG_DOCS[name]
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    written = json.loads(reference_python(REF_RSYSLOG, json.dumps({"cfg": cfg, "dir": str(ref_dir)})).stdout)
    ours_cfg = json.loads(json.dumps(cfg))
    if isinstance(ours_cfg["rsyslog"], dict):
        ours_cfg["rsyslog"]["config_dir"] = "/etc/rsyslog.d"
    result, _ = run(target, "rsyslog", ours_cfg, stage="init")
    assert result.status == "ok", result.reason
    theirs = {os.path.basename(p): pathlib.Path(p).read_text() for p in written}
    ours = {n: target.read_text(f"/etc/rsyslog.d/{n}") for n in target.listdir("/etc/rsyslog.d")}
    assert ours == theirs


def test_document_count():
    """At least 30 documents are compared (the brief)."""
    count = len(MOUNT_DOCS) + 3 + 3 + 2 + len(LAYOUTS) + len(FS_DOCS) + len(NTP_DOCS) + len(RSYSLOG_DOCS) + 9
    assert count >= 30
