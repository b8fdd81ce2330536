"""Reboots where sshd does not wait (issue 30): the generator's decision, the record the agent leaves
for it, and the local stage's confirmation, in temporary roots with the real shell generator.

A boot here is what systemd does: /run emptied, the generator run against the root, then the
agent's four stages. The generator's output directory stands for /run/systemd/generator, where
an empty ``cloudseed-before-sshd.target`` releases sshd from the network stage.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from cloudseed.agent.boot import sshd_order
from cloudseed.agent.boot.stages import Agent
from cloudseed.agent.modules import STAGE_INIT, all_module_names, load_module
from cloudseed.agent.state import PER_BOOT

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHELL = os.path.join(REPO, "cloudseed", "data", "systemd", "cloudseed-generator")
CLI = os.path.join(REPO, ".venv", "bin", "cloudseed")
TARGET = "cloudseed-before-sshd.target"
SEED = "/var/lib/cloud/seed/nocloud"
MODULES = """\
network: {config: disabled}
cloud_init_modules: [bootcmd, write_files, update_hostname, update_etc_hosts]
cloud_config_modules: [runcmd]
cloud_final_modules: [scripts_per_boot, scripts_user, final_message]
"""
USER_DATA = """\
#cloud-config
hostname: web1
fqdn: web1.example.test
manage_etc_hosts: true
write_files: [{path: /etc/app.conf, content: "x\\n"}]
bootcmd: [echo boot >> /var/tmp/bootcmd.log]
runcmd: [echo run >> /var/tmp/runcmd.log]
"""


class Machine:
    """A temporary root booted as systemd would: generator, then the agent."""

    def __init__(self, root, tmp_path):
        self.root, self.out = root, str(tmp_path / "generator")
        root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES)
        root.write("/etc/ssh/ssh_host_ed25519_key", "private\n", mode=0o600)
        root.write("/etc/hosts", "127.0.0.1 localhost\n")

    def seed(self, instance_id: str, user_data: str = USER_DATA) -> None:
        self.root.write(f"{SEED}/meta-data", f"instance-id: {instance_id}\n")
        self.root.write(f"{SEED}/user-data", user_data)

    def generate(self) -> None:
        shutil.rmtree(os.path.join(self.root.top, "run"), ignore_errors=True)
        shutil.rmtree(self.out, ignore_errors=True)
        os.makedirs(self.out)
        run_generator(self.root.top, self.out)

    def boot(self) -> int:
        self.generate()
        return Agent(self.root).run_all()

    @property
    def early(self) -> bool:
        return os.path.exists(os.path.join(self.out, TARGET))

    def run_file(self, name: str) -> str | None:
        path = self.root.path(f"/run/cloudseed/{name}")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return f.read().strip()

    def record(self) -> dict[str, str]:
        text = self.root.read_text(sshd_order.RECORD)
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def run_generator(root: str, out: str, shell: bool = True) -> None:
    if shell:
        env = {"CLOUDSEED_ROOT": root, "CLOUDSEED_BIN": CLI, "PATH": os.environ["PATH"]}
        proc = subprocess.run(["/bin/sh", SHELL, out], env=env, capture_output=True, text=True, timeout=60)
    else:
        proc = subprocess.run([CLI, "--root", root, "generator", out], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def machine(shell_target, tmp_path):
    return Machine(shell_target, tmp_path)


def test_a_reboot_of_the_same_instance_lets_sshd_start_beside_the_network_stage(machine):
    machine.seed("iid-r1")
    assert machine.boot() == 0
    assert not machine.early and machine.run_file("sshd-waits") is None  # a first boot: the units' order
    record = machine.record()
    assert record["instance_id"] == "iid-r1" and record["sshd"] == "free" and record["format"] == "1"
    assert record["identity"] == f"dir NoCloud {SEED} iid-r1"  # the seed directory's instance-id
    assert record["hostkeys"] == "/etc/ssh/ssh_host_ed25519_key"
    assert record["configs"] == "/etc/cloudseed/cloud.cfg.d/00-modules.cfg"

    assert machine.boot() == 0
    assert machine.early, machine.run_file("sshd-waits")
    with open(os.path.join(machine.out, TARGET)) as f:
        unit = f.read()
    assert "[Unit]" in unit and "DefaultDependencies=no" in unit
    assert "Before=" not in unit and "After=" not in unit  # nothing between the network stage and sshd
    assert "instance iid-r1 unchanged" in machine.run_file("sshd-early")
    assert machine.run_file("sshd-early.confirmed") is not None  # the local stage agreed
    assert machine.run_file("sshd-early.refused") is None
    # per-boot work still done, per-instance work not again
    assert machine.root.read_text("/var/tmp/bootcmd.log") == "boot\nboot\n"
    assert machine.root.read_text("/var/tmp/runcmd.log") == "run\n"


def test_changed_user_data_under_the_same_instance_id_makes_sshd_wait_after_all(machine):
    """The generator cannot read user-data: it goes early, the local stage (which can) refuses, and
    cloudseed-hold-sshd.service's conditions then hold: sshd-early there, no confirmation."""
    machine.seed("iid-r2")
    assert machine.boot() == 0
    machine.seed("iid-r2", USER_DATA.replace("bootcmd: [", "bootcmd: [echo Port 22 > /var/tmp/ssh.conf, "))
    assert machine.boot() == 0
    assert machine.early
    assert machine.run_file("sshd-early.confirmed") is None
    assert machine.run_file("sshd-early.refused") == "user-data changed"
    # the new user-data's bootcmd names ssh: the next boot keeps the units' order from the start
    assert machine.record()["sshd"] == "wait: bootcmd runs at every boot and names 'ssh'"
    assert machine.boot() == 0
    assert not machine.early and "bootcmd runs at every boot" in machine.run_file("sshd-waits")


def test_a_changed_configuration_the_generator_missed_is_caught_by_the_local_stage(machine):
    machine.seed("iid-r3")
    assert machine.boot() == 0
    inner = "/etc/cloudseed/cloud.cfg.d/00-modules.cfg"
    machine.root.write(inner, MODULES + "ssh_genkeytypes: [ed25519]\n")
    old = time.time() - 3600  # as a package would install it: an old modification time
    os.utime(machine.root.path(inner), (old, old))
    assert machine.boot() == 0
    assert machine.early  # same names, not newer than the record
    assert machine.run_file("sshd-early.refused") == "the image's configuration changed"


def test_a_new_instance_id_in_the_seed_keeps_the_units_order(machine):
    machine.seed("iid-r4")
    assert machine.boot() == 0
    machine.seed("iid-r5")
    assert machine.boot() == 0
    assert not machine.early
    assert "shows 'dir NoCloud /var/lib/cloud/seed/nocloud iid-r5'" in machine.run_file("sshd-waits")
    assert machine.root.read_text("/var/tmp/runcmd.log") == "run\nrun\n"


def test_a_failed_network_stage_leaves_no_record(machine, monkeypatch):
    machine.seed("iid-r6")
    assert machine.boot() == 0
    assert machine.root.exists(sshd_order.RECORD)
    from cloudseed.agent.boot import stages

    def broken(*args, **kwargs):
        raise RuntimeError("user-data processing broke")

    monkeypatch.setattr(stages, "_consume_userdata", broken)
    assert machine.boot() == 1
    assert not machine.root.exists(sshd_order.RECORD)
    monkeypatch.undo()
    assert machine.boot() == 0
    assert not machine.early and "no record of the last boot" in machine.run_file("sshd-waits")


# ---------------------------------------------------------------- what the record says of sshd
WAITS = {
    "bootcmd without sshd's words": ("bootcmd: [echo hi > /run/app.flag, [mkdir, -p, /run/app]]\n", ""),
    "bootcmd naming sshd's config": ("bootcmd: [echo Port 2222 > /var/tmp/sshd_config]\n",
                                     "bootcmd runs at every boot and names 'ssh'"),
    "bootcmd mounting": ("bootcmd: [[echo, /home]]\n", "bootcmd runs at every boot and names '/home'"),
    "bootcmd firewall": ("bootcmd: [echo nft add rule inet filter input tcp dport 22 drop]\n",
                         "bootcmd runs at every boot and names 'nft'"),
    "ssh module at every boot": ("cloud_init_modules: [bootcmd, [ssh, always]]\nssh_deletekeys: false\n"
                                 "ssh_genkeytypes: []\n", "module ssh runs at every boot"),
    "users at every boot": ("cloud_init_modules: [[users_groups, always]]\nusers: []\n",
                            "module users_groups runs at every boot"),
    "set_passwords at every boot": ("cloud_config_modules: [[set_passwords, always]]\nssh_pwauth: true\n",
                                    "module set_passwords runs at every boot"),
    "write_files at every boot": ("cloud_init_modules: [[write_files, always]]\n",
                                  "module write_files runs at every boot"),
    "a per-instance module that failed runs again": (
        "write_files: [{path: /etc/bad, content: x, encoding: nonsense}]\n",
        "module write_files runs again (it has not completed)"),
    "growpart and resizefs every boot are quiet": ("cloud_init_modules: [growpart, resizefs, bootcmd]\n", ""),
    "the setting": ("sshd_early_on_reboot: false\n", "sshd_early_on_reboot is false"),
}


@pytest.mark.parametrize("case", list(WAITS))
def test_what_the_record_says_of_sshd(machine, case):
    extra, expected = WAITS[case]
    text = USER_DATA
    if "bootcmd:" in extra:
        text = text.replace("bootcmd: [echo boot >> /var/tmp/bootcmd.log]\n", "")
    if "write_files:" in extra:
        text = text.replace('write_files: [{path: /etc/app.conf, content: "x\\n"}]\n', "")
    machine.seed("iid-w", text + extra)
    machine.boot()
    sshd = machine.record()["sshd"]
    assert sshd == ("wait: " + expected if expected else "free"), sshd


def test_strict_mode_keeps_sshd_waiting(machine):
    machine.root.write("/etc/cloudseed/cloud.cfg.d/50-strict.cfg", "strict: true\n")
    machine.seed("iid-strict")
    assert machine.boot() == 0
    assert machine.record()["sshd"] == "wait: strict mode is on (sshd waits for the boot's verdict)"


@pytest.mark.parametrize("part, expected", [
    ("#cloud-boothook\n#!/bin/sh\necho hi > /run/boothook.flag\n", ""),
    ("#cloud-boothook\n#!/bin/sh\nmount -a\n", "names 'mount'"),
    ("#part-handler\ndef list_types():\n    return []\ndef handle_part(*a):\n    pass\n", "part-handlers"),
    ("#include\nfile:///etc/extra.yaml\n", "#include URLs"),
])
def test_user_data_run_at_every_boot(machine, part, expected):
    machine.root.write("/etc/extra.yaml", "#cloud-config\n{}\n")
    boundary = "XYZ"
    mime = (f'Content-Type: multipart/mixed; boundary="{boundary}"\nMIME-Version: 1.0\n\n'
            f"--{boundary}\nContent-Type: text/cloud-config\n\n{USER_DATA}\n"
            f"--{boundary}\nContent-Type: {_content_type(part)}\n\n{part}\n--{boundary}--\n")
    machine.seed("iid-parts", mime)
    machine.boot()
    sshd = machine.record()["sshd"]
    assert (sshd == "free") if not expected else (expected in sshd), sshd


def _content_type(part: str) -> str:
    return {"#cloud-boothook": "text/cloud-boothook", "#part-handler": "text/part-handler",
            "#include": "text/x-include-url"}[part.split("\n")[0]]


def test_every_per_boot_module_of_the_network_stage_is_classified():
    """A per-boot init module is either known to change nothing sshd reads, or is bootcmd (whose
    commands are read); a new one must be placed in one of the two by whoever adds it."""
    for name in all_module_names():
        spec, _ = load_module(name)
        if spec.stage == STAGE_INIT and spec.frequency == PER_BOOT:
            assert name == "bootcmd" or name in sshd_order.QUIET_INIT, name


# ---------------------------------------------------------------- the generator's decision
UUID = "8c0f3a52-6c1e-4f53-9b3e-0a1b2c3d4e5f"


def nova_root(base) -> str:
    """A Nova instance rebooting: its DMI UUID is its instance id, and the last boot's record says so."""
    root = os.path.join(str(base), "root")
    files = {"sys/class/dmi/id/product_name": "OpenStack Nova\n", "sys/class/dmi/id/product_uuid": UUID + "\n",
             "var/lib/cloudseed/data/instance-id": UUID + "\n", "etc/cloud/cloud.cfg": "users: [default]\n",
             "etc/ssh/ssh_host_ed25519_key": "k\n", "etc/ssh/ssh_host_rsa_key": "k\n"}
    for inner, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, inner)), exist_ok=True)
        with open(os.path.join(root, inner), "w") as f:
            f.write(text)
    os.makedirs(os.path.join(root, f"var/lib/cloudseed/instances/{UUID}"))
    os.symlink(f"/var/lib/cloudseed/instances/{UUID}", os.path.join(root, "var/lib/cloudseed/instance"))
    old = time.time() - 60
    os.utime(os.path.join(root, "etc/cloud/cloud.cfg"), (old, old))
    write_record(root, {})
    return root


def write_record(root: str, changes: dict[str, str | None]) -> None:
    fields = {"format": "1", "instance_id": UUID, "identity": f"dmi {UUID}",
              "hostkeys": "/etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_rsa_key",
              "configs": "/etc/cloud/cloud.cfg", "config": "0", "sshd": "free", **changes}
    with open(os.path.join(root, sshd_order.RECORD.lstrip("/")), "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in fields.items() if v is not None))


def decide(root: str, out: str, shell: bool = True) -> tuple[bool, str]:
    shutil.rmtree(os.path.join(root, "run"), ignore_errors=True)
    os.makedirs(out, exist_ok=True)
    run_generator(root, out, shell)
    early = os.path.exists(os.path.join(out if shell else root + out, TARGET))
    name = "sshd-early" if early else "sshd-waits"
    path = os.path.join(root, "run/cloudseed", name)
    if not os.path.exists(path):
        return early, ""
    with open(path) as f:
        return early, f.read().strip()


def _touch_new(root: str, inner: str) -> None:
    with open(os.path.join(root, inner), "w") as f:
        f.write("ssh_pwauth: true\n")


def _newer(root: str, inner: str) -> None:
    later = time.time() + 60
    os.utime(os.path.join(root, inner), (later, later))


GENERATOR_CASES = {
    "unchanged": (lambda r: None, True, f"instance {UUID} unchanged (dmi {UUID})"),
    "no record": (lambda r: os.unlink(os.path.join(r, sshd_order.RECORD.lstrip("/"))), False, "no record"),
    "a record of another format": (lambda r: write_record(r, {"format": "2"}), False, "no record"),
    "a record of another instance": (lambda r: write_record(r, {"instance_id": "i-other"}), False,
                                     "the record is of instance 'i-other'"),
    "sshd reads this boot's work": (lambda r: write_record(r, {"sshd": "wait: module ssh runs at every boot"}),
                                    False, "sshd reads what this boot's work does: module ssh runs at every boot"),
    "another DMI UUID": (lambda r: write_record(r, {"identity": "dmi 00000000-1111"}), False,
                         f"this boot shows 'dmi {UUID}' of the instance, the last one 'dmi 00000000-1111'"),
    "no identity recorded": (lambda r: write_record(r, {"identity": ""}), False, "the last one 'nothing'"),
    "a host key gone": (lambda r: os.unlink(os.path.join(r, "etc/ssh/ssh_host_rsa_key")), False,
                        "host key /etc/ssh/ssh_host_rsa_key is missing"),
    "an empty host key": (lambda r: open(os.path.join(r, "etc/ssh/ssh_host_rsa_key"), "w").close(), False,
                          "host key /etc/ssh/ssh_host_rsa_key is missing"),
    "a new configuration file": (lambda r: (os.makedirs(os.path.join(r, "etc/cloud/cloud.cfg.d")),
                                            _touch_new(r, "etc/cloud/cloud.cfg.d/99-x.cfg")), False,
                                 "/etc/cloud/cloud.cfg.d/99-x.cfg is new"),
    "a configuration file changed since": (lambda r: _newer(r, "etc/cloud/cloud.cfg"), False,
                                           "/etc/cloud/cloud.cfg changed"),
    "a configuration file gone": (lambda r: os.unlink(os.path.join(r, "etc/cloud/cloud.cfg")), False,
                                  "a configuration file the last boot read is gone"),
}


@pytest.mark.parametrize("case", list(GENERATOR_CASES))
def test_the_generator_lets_sshd_go_early_only_when_it_can_tell(tmp_path, case):
    change, early, reason = GENERATOR_CASES[case]
    root = nova_root(tmp_path)
    change(root)
    got = decide(root, str(tmp_path / "out"))
    assert got[0] == early and reason in got[1], got
    with open(os.path.join(root, "run/cloudseed/identity")) as f:
        assert f.read() == f"dmi {UUID}\n"


def test_a_fresh_disk_keeps_the_units_order_without_a_word(tmp_path):
    root = nova_root(tmp_path)
    os.unlink(os.path.join(root, "var/lib/cloudseed/instance"))
    assert decide(root, str(tmp_path / "out")) == (False, "")


def test_the_python_generator_never_lets_sshd_go_early(tmp_path):
    """Configuration naming datasources is the Python generator's; it keeps the units' order."""
    root = nova_root(tmp_path)
    with open(os.path.join(root, "etc/cloud/cloud.cfg"), "a") as f:
        f.write("datasource_list: [OpenStack]\n")
    early, why = decide(root, str(tmp_path / "out"))
    assert not early and "Python generator" in why
    with open(os.path.join(root, "run/cloudseed/enabled")) as f:
        enabled = json.loads(f.read())
    assert enabled["enabled"] and "decided_by" not in enabled


def test_a_seed_filesystem_is_the_identity_the_label_probe_saw(tmp_path):
    """On a real loop device: the generator records the seed's datasource, type and UUID; a seed
    built again with other content (another VFAT volume id) is another identity."""
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("needs root and losetup")
    from cloudseed.provider.seeds.build import build_seed
    from cloudseed.provider.seeds.spec import InstanceSpec

    seen = []
    for iid in ("iid-vfat-1", "iid-vfat-2"):
        image = str(tmp_path / f"{iid}.img")
        build_seed("nocloud", "vfat", InstanceSpec(instance_id=iid, hostname="h"), image)
        device = subprocess.run(["losetup", "-f", "--show", "-r", image], check=True, capture_output=True,
                                text=True).stdout.strip()
        try:
            root = os.path.join(str(tmp_path), iid)
            os.makedirs(os.path.join(root, "dev/disk/by-label"))
            os.symlink(device, os.path.join(root, "dev/disk/by-label/CIDATA"))
            os.makedirs(os.path.join(root, "etc"))
            decide(root, str(tmp_path / f"out-{iid}"))
            with open(os.path.join(root, "run/cloudseed/identity")) as f:
                seen.append(f.read().strip())
        finally:
            subprocess.run(["losetup", "-d", device], check=False)
    assert all(s.startswith("seed NoCloud vfat,") for s in seen), seen
    assert seen[0] != seen[1]


def test_the_record_only_describes_a_boot_that_went_to_its_end(machine):
    """The local stage removes it (after reading it); the end of the boot writes it again."""
    machine.seed("iid-end")
    assert machine.boot() == 0
    machine.generate()
    agent = Agent(machine.root)
    assert agent.run_local() == 0
    assert not machine.root.exists(sshd_order.RECORD)  # a boot stopped here leaves none
    machine.generate()
    assert not machine.early and "no record of the last boot" in machine.run_file("sshd-waits")


def test_a_host_key_still_being_made_is_one_sshd_serves(target):
    """The first boot's RSA key is generated after the boot (deferred): the record names it, so a
    reboot before it landed keeps sshd after the network stage."""
    from cloudseed.agent.boot.boot_state import BootState

    target.write("/etc/ssh/ssh_host_ed25519_key", "k\n", mode=0o600)
    target.write("/run/cloudseed/hostkeys/rsa.pid", "4242\n", mode=0o600)
    target.write("/run/cloudseed/hostkeys/ssh_host_ecdsa_key", "k\n", mode=0o600)
    assert sshd_order.hostkeys(BootState.load(target)) == [
        "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_rsa_key"]
