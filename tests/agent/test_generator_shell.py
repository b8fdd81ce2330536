"""The shell generator decides like the Python one (``cloudseed generator``), without starting Python.

Each case is a temporary root with the facts of one kind of machine; both generators run on it
and must agree on enabled/disabled (and switch cloudseed.target on or not). Configuration the shell
does not read (any ``datasource`` setting) is handed to the Python generator. A seed linked in
/dev/disk/by-label is read from udev's database where it has a record (the last section).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from tests.agent.datasources.diskimages import make_iso, make_vfat

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHELL = os.path.join(REPO, "cloudseed", "data", "systemd", "cloudseed-generator")
CLI = os.path.join(REPO, ".venv", "bin", "cloudseed")
ON_DROPIN = "multi-user.target.d/50-cloudseed.conf"  # how both generators switch the agent on
OLD_LINK = "multi-user.target.wants/cloudseed.target"  # how versions before did


def switched_on(path: str) -> bool:
    """``path`` (a generator directory's drop-in of multi-user.target) wants cloudseed.target."""
    if not os.path.isfile(path):
        return False
    with open(path) as f:
        return "Wants=cloudseed.target" in f.read().splitlines()

CASES = {
    "bare machine": ({}, False),
    "openstack dmi": ({"sys/class/dmi/id/product_name": "OpenStack Nova\n"}, True),
    "openstack asset tag": ({"sys/class/dmi/id/chassis_asset_tag": "HUAWEICLOUD\n"}, True),
    "ec2 vendor": ({"sys/class/dmi/id/sys_vendor": "Amazon EC2\n"}, True),
    "ec2 uuid and serial": ({"sys/class/dmi/id/product_uuid": "EC2A1B2C-0000\n",
                             "sys/class/dmi/id/product_serial": "ec2a1b2c-0000\n"}, True),
    "ec2 uuid only": ({"sys/class/dmi/id/product_uuid": "ec2a1b2c-0000\n"}, False),
    "zstack asset tag": ({"sys/class/dmi/id/chassis_asset_tag": "123456.ZStack.io\n"}, True),
    "zstack near miss": ({"sys/class/dmi/id/chassis_asset_tag": "zstack.io.example\n"}, False),
    "aliyun product": ({"sys/class/dmi/id/product_name": "Alibaba Cloud ECS\n"}, True),
    "aliyun near miss": ({"sys/class/dmi/id/product_name": "Alibaba Cloud\n"}, False),
    "cloudstack kvm product": ({"sys/class/dmi/id/product_name": "CloudStack KVM Hypervisor\n"}, True),
    "cloudstack near miss": ({"sys/class/dmi/id/product_name": "Apache CloudStack\n",
                              "sys/class/dmi/id/sys_vendor": "Apache Software Foundation\n"}, False),
    "exoscale product": ({"sys/class/dmi/id/product_name": "Exoscale Compute Platform\n"}, True),
    "exoscale near miss": ({"sys/class/dmi/id/sys_vendor": "Exoscale\n"}, False),
    "upcloud vendor": ({"sys/class/dmi/id/sys_vendor": "UpCloud\n",
                        "sys/class/dmi/id/product_uuid": "00133099-f1fd-4ed3-8d2c-8f8fb26a25f5\n"}, True),
    "upcloud near miss": ({"sys/class/dmi/id/product_name": "UpCloud\n"}, False),
    "vultr vendor": ({"sys/class/dmi/id/sys_vendor": "Vultr\n"}, True),
    "vultr bare metal cmdline": ({"etc/cloudseed/cmdline": "root=/dev/sda1 vultr quiet\n"}, True),
    "vultr near miss": ({"etc/cloudseed/cmdline": "root=/dev/sda1 vultr.debug=1 novultr\n",
                         "sys/class/dmi/id/sys_vendor": "Vultr Holdings\n"}, False),
    "nwcs vendor": ({"sys/class/dmi/id/sys_vendor": "NWCS\n"}, True),
    "nwcs near miss": ({"sys/class/dmi/id/sys_vendor": "nwcs\n"}, False),
    "scaleway vendor": ({"sys/class/dmi/id/sys_vendor": "Scaleway\n"}, True),
    "scaleway initrd file": ({"var/run/scaleway": ""}, True),
    "scaleway cmdline": ({"etc/cloudseed/cmdline": "root=/dev/vda1 scaleway boot=local\n"}, True),
    "scaleway near miss": ({"sys/class/dmi/id/sys_vendor": "Scaleway SAS\n", "var/run/scaleway.d/x": ""}, False),
    "akamai linode vendor": ({"sys/class/dmi/id/sys_vendor": "Linode\n"}, True),
    "akamai vendor": ({"sys/class/dmi/id/sys_vendor": "Akamai\n"}, True),
    "akamai near miss": ({"sys/class/dmi/id/sys_vendor": "Akamai Technologies\n",
                          "sys/class/dmi/id/product_name": "Linode\n"}, False),
    "cloudcix product": ({"sys/class/dmi/id/product_name": "CloudCIX\n"}, True),
    "cloudcix near miss": ({"sys/class/dmi/id/sys_vendor": "CloudCIX\n",
                            "sys/class/dmi/id/product_name": "CloudCIX VM\n"}, False),
    "cloudsigma product": ({"sys/class/dmi/id/product_name": "CloudSigma\n"}, True),
    "cloudsigma vendor only": ({"sys/class/dmi/id/sys_vendor": "CloudSigma\n"}, False),
    "smartos product": ({"sys/class/dmi/id/product_name": "SmartDC HVM\n"}, True),
    "smartos near miss": ({"sys/class/dmi/id/product_name": "Not SmartDC\n"}, False),
    "wsl kernel release": ({"proc/sys/kernel/osrelease": "5.15.153.1-microsoft-standard-WSL2\n"}, True),
    "wsl interop": ({"proc/sys/fs/binfmt_misc/WSLInterop": "enabled\n"}, True),
    "wsl near miss": ({"proc/sys/kernel/osrelease": "6.8.0-1008-azure\n"}, False),
    "bigstep url file": ({"var/lib/cloud/data/seed/bigstep/url": "http://10.0.0.1/md\n"}, True),
    "bigstep near miss": ({"var/lib/cloud/data/seed/bigstep/.keep": ""}, False),
    "maas seed dir": ({"var/lib/cloud/seed/maas/meta-data/instance-id": "node-1\n"}, True),
    "maas ephemeral cmdline": ({"etc/cloudseed/cmdline": "ro cloud-config-url=http://10.0.0.1:5240/MAAS/cc "
                                                         "iscsi_target_name=iqn.2004-05.com.ubuntu:maas:node\n"}, True),
    "maas near miss (no iqn)": ({"etc/cloudseed/cmdline": "ro cloud-config-url=http://10.0.0.1/cc\n"}, False),
    "config metadata_url of MAAS": ({"etc/cloud/cloud.cfg.d/90_dpkg_maas.cfg":
                                    "datasource:\n  MAAS: {metadata_url: 'http://10.0.0.1/MAAS/metadata/'}\n"}, True),
    # RHEV needs a floppy: this test host has none
    "altcloud rhev without a floppy": ({"sys/class/dmi/id/product_name": "RHEV Hypervisor\n"}, False),
    "altcloud cloud-info without a floppy": ({"etc/sysconfig/cloud-info": "rhev\n"}, False),
    "xen without an IBM disk": ({"proc/xen/capabilities": "control_d\n"}, False),
    "nocloud seed dir": ({"var/lib/cloud/seed/nocloud/meta-data": "instance-id: x\n"}, True),
    "nocloud-net seed dir, user-data only": ({"var/lib/cloudseed/seed/nocloud-net/user-data": "#x\n"}, True),
    "empty seed dir": ({"var/lib/cloud/seed/nocloud/.keep": ""}, False),
    "config drive seed dir": ({"var/lib/cloud/seed/config_drive/openstack/latest/meta_data.json": "{}"}, True),
    "cmdline ds=nocloud": ({"etc/cloudseed/cmdline": "root=/dev/vda1 ds=nocloud;s=http://10.0.0.1/\n"}, True),
    "cmdline ds=NoCloud-Net": ({"etc/cloudseed/cmdline": "ro ds=NoCloud-Net\n"}, True),
    "smbios serial ds=nocloud": ({"sys/class/dmi/id/product_serial": "ds=nocloud;i=abc\n"}, True),
    "cmdline other ds": ({"etc/cloudseed/cmdline": "ds=ovf\n"}, False),
    "disabled marker": ({"etc/cloudseed/disabled": "", "sys/class/dmi/id/product_name": "OpenStack Nova\n"}, False),
    "cloud-init disabled marker": ({"etc/cloud/cloud-init.disabled": "",
                                    "var/lib/cloud/seed/nocloud/meta-data": "x\n"}, False),
    "cmdline disabled": ({"etc/cloudseed/cmdline": "cloudseed=disabled ds=nocloud\n"}, False),
    # configuration the shell does not interpret: decided by Python
    "config names only None": ({"etc/cloudseed/cloud.cfg.d/10.cfg": "datasource_list: [None]\n"}, True),
    "config metadata_urls": ({"etc/cloud/cloud.cfg.d/10.cfg":
                              "datasource:\n  Ec2: {metadata_urls: ['http://10.1.1.1']}\n"}, True),
    "config empty list": ({"etc/cloudseed/cloud.cfg": "datasource_list: [NoCloud]\n",
                           "sys/class/dmi/id/product_name": "OpenStack Nova\n"}, False),
    "cmdline ci.ds": ({"etc/cloudseed/cmdline": "ci.ds=OpenStack\n",
                       "sys/class/dmi/id/product_name": "OpenStack Nova\n"}, True),
}


def make_root(base, files: dict[str, str]) -> str:
    root = os.path.join(base, "root")
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    for inner, text in files.items():
        path = os.path.join(root, inner)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return root


def decide(root: str, out: str, shell: bool) -> tuple[bool, str]:
    shutil.rmtree(os.path.join(root, "run/cloudseed"), ignore_errors=True)  # (a udev record in run/udev stays)
    os.makedirs(out, exist_ok=True)
    if shell:
        env = {"CLOUDSEED_ROOT": root, "CLOUDSEED_BIN": CLI, "PATH": os.environ["PATH"]}
        proc = subprocess.run(["/bin/sh", SHELL, out], env=env, capture_output=True, text=True, timeout=60)
    else:
        proc = subprocess.run([CLI, "--root", root, "generator", out], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # the Python generator's paths are inside --root (also when the shell hands it the decision),
    # the shell's generator directory is as given
    linked = switched_on(root + os.path.join(out, ON_DROPIN)) or (shell and switched_on(os.path.join(out, ON_DROPIN)))
    state = "enabled" if os.path.exists(os.path.join(root, "run/cloudseed/enabled")) else "disabled"
    assert (state == "enabled") == linked
    with open(os.path.join(root, "run/cloudseed", state)) as f:
        return linked, f.read()


@pytest.mark.parametrize("case", list(CASES))
def test_shell_and_python_generators_agree(tmp_path, case):
    files, expected = CASES[case]
    root = make_root(str(tmp_path), files)
    shell = decide(root, str(tmp_path / "shell-out"), shell=True)
    python = decide(root, str(tmp_path / "python-out"), shell=False)
    assert shell[0] == python[0] == expected, (shell, python)
    if not expected:
        assert shell[1].split(" (")[0] == python[1].split(" (")[0]  # same reason, as far as it goes
    elif case.startswith(("config names", "config metadata", "cmdline ci.ds")):
        assert "decided_by" not in json.loads(shell[1])  # handed to the Python generator
    else:
        assert json.loads(shell[1])["decided_by"] == "shell"


def test_a_label_on_a_real_device_is_found(tmp_path):
    """A cidata ISO on a loop device: the shell's one blkid probe finds it, as the Python probe does."""
    if shutil.which("genisoimage") is None or os.geteuid() != 0:
        pytest.skip("needs genisoimage and root for a loop device")
    src = tmp_path / "iso"
    src.mkdir()
    (src / "meta-data").write_text("instance-id: iid-label\n")
    image = tmp_path / "seed.iso"
    subprocess.run(["genisoimage", "-quiet", "-o", str(image), "-V", "cidata", "-J", "-R", str(src)], check=True)
    device = subprocess.run(["losetup", "-f", "--show", "-r", str(image)], check=True,
                            capture_output=True, text=True).stdout.strip()
    try:
        root = make_root(str(tmp_path), {})
        linked, text = decide(root, str(tmp_path / "out"), shell=True)
        assert linked and f"cidata on {device}" in json.loads(text)["reason"]
        assert decide(root, str(tmp_path / "out2"), shell=False)[0]
    finally:
        subprocess.run(["losetup", "-d", device], check=False)


def test_a_seed_behind_devices_without_a_filesystem_is_found_by_both(tmp_path):
    """Real loop devices: one without any filesystem, one vfat labelled DATA, then a cidata ISO. The
    label probe must read past devices where it finds nothing (``blkid -p DEV...`` stops at the
    first such device, so a generator using it disabled the agent in a VM whose root disk came first)."""
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("genisoimage"):
        pytest.skip("needs root, losetup and genisoimage")
    (tmp_path / "empty.img").write_bytes(b"\0" * (4 << 20))
    (tmp_path / "data.img").write_bytes(b"\0" * (8 << 20))
    subprocess.run(["mkfs.vfat", "-n", "DATA", str(tmp_path / "data.img")], check=True, capture_output=True)
    (tmp_path / "iso").mkdir()
    (tmp_path / "iso" / "meta-data").write_text("instance-id: loop-order\n")
    subprocess.run(["genisoimage", "-quiet", "-V", "cidata", "-r", "-o", str(tmp_path / "seed.iso"),
                    str(tmp_path / "iso")], check=True)
    attached = []
    try:
        for name in ("empty.img", "data.img", "seed.iso"):  # in this order: lower loop numbers first
            attached.append(subprocess.run(["losetup", "-f", "--show", str(tmp_path / name)], check=True,
                                           capture_output=True, text=True).stdout.strip())
        root = make_root(str(tmp_path), {})
        shell = decide(root, str(tmp_path / "shell-out"), shell=True)
        python = decide(root, str(tmp_path / "python-out"), shell=False)
        assert shell[0] and python[0], (shell, python)
        assert f"cidata on {attached[2]}" in shell[1] and f"cidata on {attached[2]}" in python[1]
    finally:
        for device in attached:
            subprocess.run(["losetup", "-d", device], capture_output=True)


REBOOT_DROPIN = "cloudseed-local.service.d/50-provisioned-disk.conf"


@pytest.mark.parametrize("shell", [True, False], ids=["shell", "python"])
def test_a_provisioned_disk_gets_the_local_stage_at_low_priority(tmp_path, shell):
    """A disk that has served an instance (the ``instance`` link exists: most likely a reboot) starts
    the local stage at niceness 10 through a drop-in, so it does not slow udev's coldplug that
    networking waits for; a fresh disk keeps the unit's own priority, and a stale drop-in goes."""
    root = make_root(str(tmp_path), {"sys/class/dmi/id/product_name": "OpenStack Nova\n"})
    out = str(tmp_path / "out")

    def dropin() -> str | None:
        path = os.path.join(out if shell else root + out, REBOOT_DROPIN)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return f.read()

    assert decide(root, out, shell=shell)[0]
    assert dropin() is None
    os.makedirs(os.path.join(root, "var/lib/cloudseed/instances/i-1"))
    os.symlink("/var/lib/cloudseed/instances/i-1", os.path.join(root, "var/lib/cloudseed/instance"))
    assert decide(root, out, shell=shell)[0]
    text = dropin()
    assert text is not None and "[Service]\nNice=10\n" in text
    os.unlink(os.path.join(root, "var/lib/cloudseed/instance"))
    assert decide(root, out, shell=shell)[0]
    assert dropin() is None


def test_both_generators_write_the_same_dropin(tmp_path):
    root = make_root(str(tmp_path), {"sys/class/dmi/id/sys_vendor": "Hetzner\n"})
    os.makedirs(os.path.join(root, "var/lib/cloudseed/instances/i-1"))
    os.symlink("/var/lib/cloudseed/instances/i-1", os.path.join(root, "var/lib/cloudseed/instance"))
    decide(root, str(tmp_path / "s"), shell=True)
    decide(root, str(tmp_path / "p"), shell=False)
    with open(os.path.join(str(tmp_path / "s"), REBOOT_DROPIN)) as a, \
            open(root + os.path.join(str(tmp_path / "p"), REBOOT_DROPIN)) as b:
        assert a.read() == b.read()


def test_a_by_label_link_is_a_hint_that_blkid_confirms(tmp_path):
    """udev's /dev/disk/by-label (left by the initramfs) points the shell generator at one device to
    probe instead of all; the link alone decides nothing: a 'cidata' link to a device without that
    label is not a seed, and the full probe (which finds none here) has the last word."""
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("genisoimage"):
        pytest.skip("needs root, losetup and genisoimage")
    (tmp_path / "iso").mkdir()
    (tmp_path / "iso" / "meta-data").write_text("instance-id: by-label\n")
    subprocess.run(["genisoimage", "-quiet", "-V", "cidata", "-r", "-o", str(tmp_path / "seed.iso"),
                    str(tmp_path / "iso")], check=True)
    (tmp_path / "data.img").write_bytes(b"\0" * (8 << 20))
    subprocess.run(["mkfs.vfat", "-n", "DATA", str(tmp_path / "data.img")], check=True, capture_output=True)
    root = make_root(str(tmp_path), {})
    links = os.path.join(root, "dev/disk/by-label")
    os.makedirs(links)
    data = subprocess.run(["losetup", "-f", "--show", "-r", str(tmp_path / "data.img")], check=True,
                          capture_output=True, text=True).stdout.strip()
    try:
        os.symlink(data, os.path.join(links, "CIDATA"))  # a lying link: the device is labelled DATA
        linked, text = decide(root, str(tmp_path / "out1"), shell=True)
        assert not linked, text
        seed = subprocess.run(["losetup", "-f", "--show", "-r", str(tmp_path / "seed.iso")], check=True,
                              capture_output=True, text=True).stdout.strip()
        try:
            os.symlink(seed, os.path.join(links, "cidata"))
            linked, text = decide(root, str(tmp_path / "out2"), shell=True)
            assert linked and f"cidata on {links}/cidata" in json.loads(text)["reason"], text
        finally:
            subprocess.run(["losetup", "-d", seed], capture_output=True)
    finally:
        subprocess.run(["losetup", "-d", data], capture_output=True)


# ------------------------------------------------------------------ the label probe read by the shell
def _attach(image: str) -> str:
    return subprocess.run(["losetup", "-f", "--show", "-r", image], check=True, capture_output=True,
                          text=True).stdout.strip()


def _needs_loop_devices():
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("genisoimage"):
        pytest.skip("needs root, losetup and genisoimage")


def _cidata_iso(tmp_path) -> str:
    (tmp_path / "iso").mkdir()
    (tmp_path / "iso" / "meta-data").write_text("instance-id: i-probe\n")
    image = str(tmp_path / "seed.iso")
    subprocess.run(["genisoimage", "-quiet", "-V", "cidata", "-r", "-o", image, str(tmp_path / "iso")], check=True)
    return image


def _programs(root: str, out: str, tmp_path) -> tuple[list[str], int]:
    """(programs the generator executed, processes it forked), from ``strace -ff`` over one real
    run: one trace file per process, so no call is split by another's."""
    traces = tmp_path / "traces"
    shutil.rmtree(traces, ignore_errors=True)
    traces.mkdir()
    shutil.rmtree(os.path.join(root, "run/cloudseed"), ignore_errors=True)  # (a udev record in run/udev stays)
    env = {"CLOUDSEED_ROOT": root, "CLOUDSEED_BIN": CLI, "PATH": os.environ["PATH"]}
    subprocess.run(["strace", "-ff", "-qq", "-o", str(traces / "t"), "-e", "trace=execve", "/bin/sh", SHELL, out],
                   env=env, check=True, capture_output=True, timeout=60)
    programs = []
    for trace in traces.iterdir():
        ran = re.findall(r'^execve\("([^"]+)".*= 0$', trace.read_text(), re.M)
        programs += [os.path.basename(path) for path in ran if path != "/bin/sh"]
    return programs, len(list(traces.iterdir())) - 1  # every file but the shell's own is a fork


@pytest.mark.parametrize("kind", ["first boot", "reboot"])
def test_a_seed_found_by_label_costs_two_programs_and_no_subshell(tmp_path, kind):
    """The lab's boots (a cidata ISO that udev linked in /dev/disk/by-label): mkdir and blkid are
    all the generator starts, on a reboot too (sshd_order is builtins). blkid's output is read back
    from a file by the shell: no awk, no $(...) subshell, no pipe (each was a fork under emulation)."""
    _needs_loop_devices()
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    device = _attach(_cidata_iso(tmp_path))
    try:
        root = make_root(str(tmp_path), {})
        os.makedirs(os.path.join(root, "dev/disk/by-label"))
        os.symlink(device, os.path.join(root, "dev/disk/by-label/cidata"))
        if kind == "reboot":
            os.makedirs(os.path.join(root, "var/lib/cloudseed/instances/i-probe"))
            os.symlink("/var/lib/cloudseed/instances/i-probe", os.path.join(root, "var/lib/cloudseed/instance"))
        programs, forks = _programs(root, str(tmp_path / "out"), tmp_path)
        assert sorted(programs) == ["blkid", "mkdir"] and forks == 2, (programs, forks)
        with open(os.path.join(root, "run/cloudseed/enabled")) as f:
            assert "NoCloud (filesystem labelled cidata on " in f.read()
        with open(os.path.join(root, "run/cloudseed/label-probe")) as f:  # what blkid said, kept
            assert "LABEL=cidata" in f.read().splitlines()
        assert os.path.exists(os.path.join(str(tmp_path / "out"), REBOOT_DROPIN)) == (kind == "reboot")
    finally:
        subprocess.run(["losetup", "-d", device], capture_output=True)


def test_a_seed_uuid_is_recorded_in_upper_case_as_blkid_reads_it(tmp_path):
    """A UDF filesystem is Azure's provisioning media whatever its label; its UUID (lower-case hex
    as blkid prints it) goes into /run/cloudseed/identity upper-cased, without `tr` or awk."""
    _needs_loop_devices()
    if shutil.which("mkudffs") is None:
        pytest.skip("needs mkudffs")
    image = str(tmp_path / "media.udf")
    subprocess.run(["truncate", "-s", "4M", image], check=True)
    subprocess.run(["mkudffs", "--label=cidata", image], check=True, capture_output=True)
    device = _attach(image)
    try:
        uuid = subprocess.run(["blkid", "-c", "/dev/null", "-o", "value", "-s", "UUID", device],
                              capture_output=True, text=True, check=True).stdout.strip()
        assert uuid and uuid != uuid.upper(), uuid  # the case this test is about
        root = make_root(str(tmp_path), {})
        os.makedirs(os.path.join(root, "dev/disk/by-label"))
        os.symlink(device, os.path.join(root, "dev/disk/by-label/cidata"))  # the label probe reads it
        linked, text = decide(root, str(tmp_path / "out"), shell=True)
        assert linked and "Azure (Azure provisioning media on " in json.loads(text)["reason"], text
        with open(os.path.join(root, "run/cloudseed/identity")) as f:
            assert f.read() == f"seed Azure udf,{uuid.upper()}\n"
    finally:
        subprocess.run(["losetup", "-d", device], capture_output=True)


def test_an_escaped_blank_in_a_label_is_read_as_a_blank(tmp_path):
    """blkid's export format writes a label's blank as a backslash and a blank: 'OVF ENV' (an OVF
    transport ISO) is found, as by the Python probe; 'OVF\\ENV' is not an OVF label."""
    _needs_loop_devices()
    verdicts = {}
    for label in ("OVF ENV", "OVF$ENV"):
        (tmp_path / label).mkdir()
        (tmp_path / label / "ovf-env.xml").write_text("<Environment/>\n")
        image = str(tmp_path / f"{label}.iso")
        subprocess.run(["genisoimage", "-quiet", "-V", label, "-r", "-o", image, str(tmp_path / label)], check=True)
        device = _attach(image)
        try:
            with_blkid = subprocess.run(["blkid", "-c", "/dev/null", "-o", "export", device], capture_output=True,
                                        text=True).stdout
            assert "LABEL=OVF\\" + label[3] + "ENV" in with_blkid.splitlines(), with_blkid  # escaped by blkid
            root = make_root(str(tmp_path / f"root-{label}"), {})
            shell = decide(root, str(tmp_path / f"shell-{label}"), shell=True)
            python = decide(root, str(tmp_path / f"python-{label}"), shell=False)
            verdicts[label] = (shell[0], python[0], shell[1])
        finally:
            subprocess.run(["losetup", "-d", device], capture_output=True)
    assert verdicts["OVF ENV"][:2] == (True, True) and "OVF (filesystem labelled as an OVF" in verdicts["OVF ENV"][2]
    assert verdicts["OVF$ENV"][:2] == (False, False), verdicts


def test_a_disabled_boot_removes_a_stale_switch_and_starts_no_rm_when_there_is_none(tmp_path):
    """disable removes what an earlier run left (the drop-in, the older versions' link, the enabled
    record), and at boot, where none is there, it starts no rm."""
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    root = make_root(str(tmp_path), {"etc/cloudseed/disabled": ""})
    out = str(tmp_path / "out")
    os.makedirs(os.path.join(out, "multi-user.target.wants"))
    os.symlink("/usr/lib/systemd/system/cloudseed.target", os.path.join(out, OLD_LINK))
    os.makedirs(os.path.join(out, "multi-user.target.d"))
    with open(os.path.join(out, ON_DROPIN), "w") as f:
        f.write("[Unit]\nWants=cloudseed.target\n")
    linked, text = decide(root, out, shell=True)
    assert not linked and "disabled exists" in text
    assert not os.path.lexists(os.path.join(out, OLD_LINK)) and not os.path.lexists(os.path.join(out, ON_DROPIN))
    programs, _ = _programs(root, str(tmp_path / "fresh"), tmp_path)
    assert programs == ["mkdir"], programs


@pytest.mark.parametrize("shell", [True, False], ids=["shell", "python"])
def test_the_agent_is_switched_on_by_a_dropin_and_an_older_link_goes(tmp_path, shell):
    """Both generators switch the agent on the same way: multi-user.target's drop-in wanting
    cloudseed.target (the shell writes it with a redirection: no `ln` process), the same text from
    both; a wants link an older version left in the directory is removed, by the Python generator
    on a disabled boot too."""
    root = make_root(str(tmp_path), {"sys/class/dmi/id/product_name": "OpenStack Nova\n"})
    out = str(tmp_path / "out")
    top = out if shell else root + out
    os.makedirs(os.path.join(top, "multi-user.target.wants"))
    os.symlink("/usr/lib/systemd/system/cloudseed.target", os.path.join(top, OLD_LINK))
    assert decide(root, out, shell=shell)[0]
    assert not os.path.lexists(os.path.join(top, OLD_LINK))
    with open(os.path.join(top, ON_DROPIN)) as f:
        text = f.read()
    assert text.endswith("\n[Unit]\nWants=cloudseed.target\n") and text.startswith("# cloudseed-generator: "), text
    from cloudseed.commands.generator import ON_DROPIN_TEXT

    assert text == ON_DROPIN_TEXT  # the same file from either generator
    os.symlink("/usr/lib/systemd/system/cloudseed.target", os.path.join(top, OLD_LINK))
    os.makedirs(os.path.join(root, "etc/cloudseed"), exist_ok=True)
    with open(os.path.join(root, "etc/cloudseed/disabled"), "w"):
        pass
    assert not decide(root, out, shell=shell)[0]
    assert not os.path.lexists(os.path.join(top, OLD_LINK)) and not os.path.lexists(os.path.join(top, ON_DROPIN))


# ------------------------------------------------------------------ a by-label device read from udev's database
# At boot the initramfs's udev has run libblkid on every device and kept the reading in
# /run/udev/data/b<major>:<minor>; the generator uses it for the devices linked in /dev/disk/by-label
# under a seed's name, and must decide exactly as blkid's reading makes it decide. The database
# entries here are real: `udevadm test-builtin blkid` (udev's own builtin, no udevd needed) reads
# real loop devices with real filesystems, and its properties are written as udev writes its
# database, into the test root's /run. Each machine is decided three ways: the shell with the
# database, the shell without it (its blkid probe), and `cloudseed generator`.
def _needs_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root for loop devices")
    missing = [tool for tool in ("losetup", "udevadm", "blkid", *tools) if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


def udev_properties(device: str) -> dict[str, str]:
    """What udev's blkid builtin reads of ``device`` (``ID_FS_TYPE``, ``ID_FS_LABEL_ENC``...)."""
    proc = subprocess.run(["udevadm", "test-builtin", "blkid", f"/sys/class/block/{os.path.basename(device)}"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return dict(line.split("=", 1) for line in proc.stdout.splitlines()
                if "=" in line and line.split("=", 1)[0].isupper() and line.startswith("ID_"))


def write_udev_record(root: str, device: str, properties: dict[str, str]) -> str:
    """``properties`` as udev keeps them for ``device``: ``<root>/run/udev/data/b<major>:<minor>``
    (its links as S: lines, the initialisation time as I:, each property as an E: line)."""
    with open(f"/sys/class/block/{os.path.basename(device)}/dev") as f:
        major_minor = f.read().strip()
    lines = []
    if properties.get("ID_FS_LABEL_ENC"):
        lines.append(f"S:disk/by-label/{properties['ID_FS_LABEL_ENC']}")
    if properties.get("ID_FS_UUID_ENC"):
        lines.append(f"S:disk/by-uuid/{properties['ID_FS_UUID_ENC']}")
    lines.append(f"I:{time.monotonic_ns() // 1000}")
    lines += [f"E:{key}={value}" for key, value in properties.items()]
    lines.append("G:systemd")
    path = os.path.join(root, "run/udev/data", f"b{major_minor}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def make_device(top: str, fstype: str, label: str, uuid: str | None = None) -> str:
    """An image of ``fstype`` labelled ``label`` (``none``: no filesystem at all)."""
    os.makedirs(f"{top}/src", exist_ok=True)
    with open(f"{top}/src/meta-data", "w") as f:
        f.write("instance-id: i-udev\n")
    image = f"{top}/disk.img"
    if fstype == "iso9660":
        return make_iso(f"{top}/src", image, label)
    if fstype == "vfat":
        return make_vfat(f"{top}/src", image, label, uuid)
    subprocess.run(["truncate", "-s", "4M", image], check=True)
    if fstype == "udf":
        subprocess.run(["mkudffs", f"--label={label}", image], check=True, capture_output=True)
    return image


def _decisions(tmp_path, link: str, device: str, record: bool) -> dict:
    """The shell's decision on a root whose by-label ``link`` names ``device`` (with udev's record
    of it or without), its programs, and what it kept of the seed."""
    case = tmp_path / ("udev" if record else "blkid")
    root = make_root(str(case), {})
    os.makedirs(os.path.join(root, "dev/disk/by-label"))
    os.symlink(device, os.path.join(root, "dev/disk/by-label", link))
    if record:
        write_udev_record(root, device, udev_properties(device))
    programs, _ = _programs(root, str(case / "traced"), tmp_path)
    on, text = decide(root, str(case / "out"), shell=True)
    identity = os.path.join(root, "run/cloudseed/identity")
    kept = None
    if os.path.exists(identity):
        with open(identity) as f:
            kept = f.read()
    # (the device is named by the link, inside this case's root)
    reason = json.loads(text)["reason"].removeprefix("possible datasources: ").replace(root, "ROOT") if on \
        else text.split(" (")[0]
    return {"on": on, "reason": reason, "identity": kept, "programs": sorted(programs), "root": root}


# (filesystem, label, UUID, by-label link name, what the label probe finds) -- the link may lie:
# it is a hint, and the device's own reading decides
DEVICES = {
    "cidata ISO": ("iso9660", "cidata", None, "cidata", "NoCloud (filesystem labelled cidata on "),
    "CIDATA vfat": ("vfat", "CIDATA", None, "CIDATA", "NoCloud (filesystem labelled cidata on "),
    "config-2 ISO": ("iso9660", "config-2", None, "config-2", "ConfigDrive (filesystem labelled config-2 on "),
    "config-2 vfat, IBM's UUID, no Xen": ("vfat", "config-2", "9796-932E", "config-2",
                                          "ConfigDrive (filesystem labelled config-2 on "),
    "UDF labelled cidata (Azure's media)": ("udf", "cidata", None, "cidata", "Azure (Azure provisioning media on "),
    # udev writes the blank as \x20, blkid as '\ ': both read as 'OVF ENV'
    "a cidata link to an 'OVF ENV' ISO": ("iso9660", "OVF ENV", None, "cidata",
                                          "OVF (filesystem labelled as an OVF transport on "),
}


@pytest.mark.parametrize("kind", list(DEVICES))
def test_udev_reading_decides_as_blkid_and_python_do_without_a_process(tmp_path, kind):
    """udev's record of the by-label device decides as blkid's reading does (same datasource, same
    device, same identity kept for the next boot), as the Python detection does; with it the
    generator starts one program (mkdir), against mkdir and blkid without it."""
    fstype, label, uuid, link, found = DEVICES[kind]
    _needs_tools("strace", *(["mkudffs"] if fstype == "udf" else ["genisoimage"] if fstype == "iso9660"
                             else ["mkfs.vfat", "mcopy"]))
    device = _attach(make_device(str(tmp_path / "image"), fstype, label, uuid))
    try:
        properties = udev_properties(device)
        assert properties.get("ID_FS_TYPE") == fstype, properties
        with_udev = _decisions(tmp_path, link, device, record=True)
        with_blkid = _decisions(tmp_path, link, device, record=False)
        python = decide(with_blkid["root"], str(tmp_path / "python-out"), shell=False)
    finally:
        subprocess.run(["losetup", "-d", device], capture_output=True)
    assert with_udev["on"] and with_blkid["on"] and python[0], (with_udev, with_blkid, python)
    assert with_udev["reason"].startswith(found), with_udev
    assert with_udev["reason"] == with_blkid["reason"] and with_udev["identity"] == with_blkid["identity"]
    assert with_udev["identity"].startswith(f"seed {found.split(' ')[0]} {fstype},"), with_udev
    assert with_udev["programs"] == ["mkdir"], with_udev["programs"]
    assert with_blkid["programs"] == ["blkid", "mkdir"], with_blkid["programs"]
    with open(os.path.join(with_udev["root"], "run/cloudseed/label-probe")) as f:
        kept = f.read()
    assert kept.startswith("# udev's reading (/run/udev/data/b") and f"TYPE={fstype}\n" in kept, kept


# (filesystem, label, by-label link name, blkid started: how often)
NOT_FROM_UDEV = {
    # a value udev encodes otherwise than blkid's export format: blkid reads the device
    "a cidata link to an 'OVF$ENV' ISO (\\x24 in udev's label)": ("iso9660", "OVF$ENV", "cidata", 2),
    # no filesystem: udev's record has no ID_FS_TYPE; blkid reads the device
    "a cidata link to a device without a filesystem": ("none", "", "cidata", 2),
    # udev's reading says: not a seed; every device is probed then, as without the record
    "a cidata link to a vfat labelled DATA": ("vfat", "DATA", "cidata", 1),
}


@pytest.mark.parametrize("kind", list(NOT_FROM_UDEV))
def test_what_udev_cannot_settle_goes_to_blkid_with_the_same_verdict(tmp_path, kind):
    """A record whose values blkid would print otherwise, or without a filesystem type, is left to
    blkid's probe of the device; a record that shows no seed leaves the probe of every device. The
    verdict is the one without the record either way (here: no seed on these devices)."""
    fstype, label, link, probes = NOT_FROM_UDEV[kind]
    _needs_tools("strace", "genisoimage", "mkfs.vfat", "mcopy")
    device = _attach(make_device(str(tmp_path / "image"), fstype, label))
    try:
        with_udev = _decisions(tmp_path, link, device, record=True)
        with_blkid = _decisions(tmp_path, link, device, record=False)
        python = decide(with_blkid["root"], str(tmp_path / "python-out"), shell=False)
    finally:
        subprocess.run(["losetup", "-d", device], capture_output=True)
    assert with_udev["on"] == with_blkid["on"] == python[0], (with_udev, with_blkid, python)
    assert with_udev["reason"] == with_blkid["reason"], (with_udev, with_blkid)
    if not with_udev["on"]:
        assert with_udev["reason"] == "no datasource can exist here", with_udev
    assert with_udev["programs"] == sorted(["mkdir", *["blkid"] * probes]), with_udev["programs"]
