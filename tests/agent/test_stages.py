"""The four stages end to end in temporary roots: files, modes, frequencies, new instances."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from tests.agent.boot_support import CORE_MODULES, USER_DATA, boot, lines, read, seed, status


def test_four_stages_from_a_seed_directory(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-one\nlocal-hostname: web1\n")
    assert boot(root) == 0
    assert read(root, "/etc/demo/app.conf") == "key=value\n"
    assert stat.S_IMODE(root.stat("/etc/demo/app.conf").st_mode) == 0o640
    assert root.read_bytes("/etc/demo/blob.bin") == b"hello world"
    assert stat.S_IMODE(root.stat("/etc/demo/blob.bin").st_mode) == 0o600
    assert read(root, "/etc/demo/late.txt") == "written in the final stage"
    assert lines(root, "/var/tmp/bootcmd.log") == ["boot"]
    assert lines(root, "/var/tmp/runcmd.log") == ["run"]
    assert lines(root, "/var/tmp/runcmd-iid") == ["iid-one"]
    # state: instance directory, link, raw user-data private
    assert os.path.realpath(root.path("/var/lib/cloudseed/instance")).endswith("instances/iid-one")
    ud = "/var/lib/cloudseed/instances/iid-one/user-data.txt"
    assert stat.S_IMODE(root.stat(ud).st_mode) == 0o600
    assert stat.S_IMODE(root.stat("/run/cloudseed/instance-data-sensitive.json").st_mode) == 0o600
    data = json.loads(read(root, "/run/cloudseed/instance-data.json"))
    assert data["v1"]["instance_id"] == "iid-one" and data["instance_id"] == "iid-one"
    assert data["v1"]["local_hostname"] == "web1"
    assert data["merged_cfg"] == "redacted for non-root user"
    # the system facts cloud-init takes from the platform module (built without its `uname -p` process)
    import platform

    assert data["v1"]["system_platform"] == platform.platform()
    assert data["v1"]["python_version"] == platform.python_version()
    assert data["sys_info"]["uname"][:5] == list(platform.uname())[:5]
    st = status(root)["v1"]
    assert st["datasource"] == "NoCloud"
    assert all(st[k]["finished"] for k in ("init-local", "init", "modules-config", "modules-final"))
    result = json.loads(read(root, "/run/cloudseed/result.json"))
    assert result["v1"]["errors"] == []


def test_reboot_reruns_only_per_boot_work_and_new_instance_reruns_per_instance(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-a\n")
    root.write("/var/lib/cloudseed/scripts/per-boot/10-mark", "#!/bin/sh\necho b >> /var/tmp/perboot\n", mode=0o755)
    root.write("/var/lib/cloudseed/scripts/per-instance/10-mark",
               "#!/bin/sh\necho i >> /var/tmp/perinstance\n", mode=0o755)
    root.write("/var/lib/cloudseed/scripts/per-once/10-mark", "#!/bin/sh\necho o >> /var/tmp/peronce\n", mode=0o755)
    assert boot(root) == 0
    assert boot(root) == 0  # same instance, reboot
    assert lines(root, "/var/tmp/bootcmd.log") == ["boot", "boot"]
    assert lines(root, "/var/tmp/perboot") == ["b", "b"]
    assert lines(root, "/var/tmp/runcmd.log") == ["run"]
    assert lines(root, "/var/tmp/perinstance") == ["i"]
    seed(root, "instance-id: iid-b\n")  # the image is started as a new instance
    assert boot(root) == 0
    assert lines(root, "/var/tmp/bootcmd.log") == ["boot"] * 3
    assert lines(root, "/var/tmp/runcmd.log") == ["run", "run"]
    assert lines(root, "/var/tmp/perinstance") == ["i", "i"]
    assert lines(root, "/var/tmp/peronce") == ["o"]  # never again
    assert read(root, "/var/lib/cloudseed/data/previous-instance-id").strip() == "iid-a"
    assert lines(root, "/var/tmp/runcmd-iid") == ["iid-b"]


def test_module_frequency_override_in_the_module_list(shell_target):
    root = shell_target
    root.write("/etc/cloudseed/cloud.cfg.d/50-always.cfg", "cloud_config_modules:\n  - [runcmd, always]\n"
               "cloud_final_modules:\n  - [scripts_user, always]\n")
    seed(root, "instance-id: iid-freq\n")
    boot(root)
    boot(root)
    assert lines(root, "/var/tmp/runcmd.log") == ["run", "run"]


@pytest.fixture
def cidata_iso(tmp_path):
    if shutil.which("genisoimage") is None or os.geteuid() != 0:
        pytest.skip("needs genisoimage and root for a loop device")
    src = tmp_path / "iso"
    src.mkdir()
    (src / "meta-data").write_text("instance-id: iid-iso\nlocal-hostname: from-iso\n")
    (src / "user-data").write_text("#cloud-config\nwrite_files:\n  - path: /etc/from-iso\n    content: iso\n")
    image = tmp_path / "seed.iso"
    subprocess.run(["genisoimage", "-quiet", "-o", str(image), "-V", "cidata", "-J", "-R", str(src)], check=True)
    device = subprocess.run(["losetup", "-f", "--show", "-r", str(image)], check=True,
                            capture_output=True, text=True).stdout.strip()
    yield device
    subprocess.run(["losetup", "-d", device], check=False)


def test_local_stage_reads_a_real_cidata_iso(shell_target, cidata_iso):
    root = shell_target
    root.write("/etc/cloudseed/cloud.cfg.d/00-core-modules.cfg", CORE_MODULES)
    assert boot(root) == 0
    assert read(root, "/etc/from-iso") == "iso"
    data = json.loads(read(root, "/run/cloudseed/instance-data.json"))
    assert data["v1"]["instance_id"] == "iid-iso"
    assert data["v1"]["subplatform"].startswith("config-disk (/dev/loop")
    # the private mount is gone afterwards
    with open("/proc/self/mounts") as f:
        assert cidata_iso not in f.read()


def test_kernel_cmdline_nocloud_with_file_seed(shell_target, tmp_path):
    root = shell_target
    seed_dir = tmp_path / "seedfrom"
    seed_dir.mkdir()
    (seed_dir / "meta-data").write_text("local-hostname: from-file\n")
    (seed_dir / "user-data").write_text("#cloud-config\nwrite_files:\n  - path: /etc/from-file\n    content: f\n")
    root.write("/etc/cloudseed/cloud.cfg.d/00-core-modules.cfg", CORE_MODULES)
    root.write("/etc/cloudseed/cmdline", f"root=/dev/vda1 ds=nocloud;s=file://{seed_dir}/;i=iid-cmdline")
    assert boot(root) == 0
    assert read(root, "/etc/from-file") == "f"
    data = json.loads(read(root, "/run/cloudseed/instance-data.json"))
    assert data["v1"]["instance_id"] == "iid-cmdline"  # i= wins over the seed's meta-data
    assert data["v1"]["local_hostname"] == "from-file"


def test_disabled_by_marker_does_nothing(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-off\n")
    root.write("/etc/cloudseed/disabled", "")
    assert boot(root) == 0
    assert not root.exists("/etc/demo/app.conf")
    assert status(root)["v1"]["disabled"].startswith("/etc/cloudseed/disabled")


def test_vendor_data_merges_under_user_data_and_can_be_switched_off(shell_target):
    root = shell_target
    vendor = "#cloud-config\nwrite_files:\n  - path: /etc/vendor\n    content: v\nruncmd: [echo vendor]\n"
    seed(root, "instance-id: iid-v\n", user="#cloud-config\nruncmd:\n  - echo user >> /var/tmp/who\n",
         vendor=vendor)
    boot(root)
    assert read(root, "/etc/vendor") == "v"  # a vendor key the user did not set applies
    assert lines(root, "/var/tmp/who") == ["user"]  # the user's runcmd wins over the vendor's
    seed(root, "instance-id: iid-v2\n",
         user="#cloud-config\nvendor_data: {enabled: false}\nruncmd: ['echo user2 >> /var/tmp/who']\n",
         vendor=vendor.replace("/etc/vendor", "/etc/vendor2"))
    boot(root)
    assert not root.exists("/etc/vendor2")
    assert lines(root, "/var/tmp/who") == ["user", "user2"]


def test_stage_functions_share_one_boot_state_and_build_instance_data_once_per_stage(shell_target, monkeypatch):
    from cloudseed.agent.boot.stages import BootState, run_local, run_modules, run_network
    from cloudseed.agent.state import instance_data_json as instance_data

    root = shell_target
    seed(root, "instance-id: iid-state\n")
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    built = []
    real_build = instance_data.build
    monkeypatch.setattr(instance_data, "build", lambda *a, **k: built.append(1) or real_build(*a, **k))
    state = BootState.load(root)
    assert run_local(state) == 0
    assert len(built) == 1
    found = state.datasource
    assert found is not None and found.instance_id == "iid-state"
    assert run_network(state) == 0
    assert len(built) == 2 and state.datasource is found  # kept in memory, not re-read from the cache
    assert run_modules(state, "config") == 0 and run_modules(state, "final") == 0
    assert len(built) == 2  # what the network stage wrote already describes this datasource
    assert lines(root, "/var/tmp/runcmd-iid") == ["iid-state"]


def test_userdata_step_does_not_import_the_stages():
    """The user-data step takes the boot state, not the orchestrator: no import cycle."""
    code = ("import sys, cloudseed.agent.boot.userdata_stage, cloudseed.agent.boot.stage_local; "
            "print('cloudseed.agent.boot.stages' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_reboot_keeps_schema_warnings_without_checking_again_and_rewrites_nothing_unchanged(shell_target, monkeypatch):
    """A reboot of the same instance does per-boot work only: the cloud-config's schema check (it
    loads every module's schema) is reused while the config is the same, and the instance's
    user-data files are not rewritten (each write is an fsync on the boot's critical path)."""
    from cloudseed.agent.config import schema

    root = shell_target
    seed(root, "instance-id: iid-check\n", user=USER_DATA + "no_such_key: 1\n")
    checked = []
    real = schema.validate_config
    monkeypatch.setattr(schema, "validate_config", lambda *a, **k: checked.append(1) or real(*a, **k))
    assert boot(root) == 0
    first = status(root)["v1"]["init"]["warnings"]
    assert any("no_such_key" in w for w in first) and checked == [1]
    idir = "/var/lib/cloudseed/instances/iid-check"
    kept = {name: root.stat(f"{idir}/{name}").st_ino for name in
            ("user-data.txt", "user-data.processed.json", "cloud-config.json", "cloud-config.checked.json",
             "datasource.json")}
    assert boot(root) == 0
    assert status(root)["v1"]["init"]["warnings"] == first  # the same warnings, from the kept verdict
    assert checked == [1]
    assert {name: root.stat(f"{idir}/{name}").st_ino for name in kept} == kept  # not replaced
    assert lines(root, "/var/tmp/bootcmd.log") == ["boot", "boot"]
    seed(root, "instance-id: iid-check\n", user=USER_DATA + "other_key: 1\n")  # same instance, new user-data
    assert boot(root) == 0
    again = status(root)["v1"]["init"]["warnings"]
    assert checked == [1, 1] and any("other_key" in w for w in again) and not any("no_such_key" in w for w in again)
    assert root.stat(f"{idir}/user-data.txt").st_ino != kept["user-data.txt"]
    assert stat.S_IMODE(root.stat(f"{idir}/user-data.txt").st_mode) == 0o600


# Every per-boot module has a reboot test: here (a root), or in the VM suite where it needs a
# disk or a kernel (tests/e2e/test_boots.py: growpart, resizefs, bootcmd, scripts_per_boot,
# update_etc_hosts, final_message and the fstab mount after a reboot of the unchanged instance).
PER_BOOT_REBOOT_TESTS = {
    "bootcmd": "here and e2e", "update_hostname": "here", "update_etc_hosts": "here and e2e",
    "scripts_per_boot": "here and e2e", "final_message": "here and e2e",
    "growpart": "e2e (the disk grows between the boots)", "resizefs": "e2e (the disk grows between the boots)",
    "disable_ec2_metadata": "modules/test_disable_ec2_metadata.py (its route, in a real netns, is not kept)",
    "metadata_access": "modules/test_metadata_access.py",
    "chef": "modules/test_chef.py (its frequency; a run needs the chef client)",
}


def test_every_per_boot_module_has_a_reboot_test():
    from cloudseed.agent.modules import all_module_names, load_module
    from cloudseed.agent.state import PER_BOOT

    per_boot = {n for n in all_module_names() if load_module(n)[0].frequency == PER_BOOT}
    assert per_boot == set(PER_BOOT_REBOOT_TESTS), \
        f"per-boot modules without a reboot test: {sorted(per_boot - set(PER_BOOT_REBOOT_TESTS))}"


def test_per_boot_modules_take_effect_again_on_a_reboot(shell_target, capsys):
    """A reboot of the same instance: what changed on the system since the first boot is put back
    by the per-boot modules (hostname, /etc/hosts), boot commands and per-boot scripts run again,
    the final message is written again; per-instance work does not run again."""
    root = shell_target
    root.write("/etc/cloudseed/cloud.cfg.d/00-core-modules.cfg", """\
network: {config: disabled}
cloud_init_modules: [bootcmd, update_hostname, update_etc_hosts]
cloud_config_modules: [runcmd]
cloud_final_modules: [scripts_user, scripts_per_boot, final_message]
""")
    seed(root, "instance-id: iid-pb\nlocal-hostname: web1\n", user="""\
#cloud-config
fqdn: web1.example.test
manage_etc_hosts: true
bootcmd: [echo boot >> /var/tmp/bootcmd.log]
runcmd: [echo run >> /var/tmp/runcmd.log]
final_message: "done $DATASOURCE"
""")
    root.write("/var/lib/cloudseed/scripts/per-boot/10-mark", "#!/bin/sh\necho b >> /var/tmp/perboot\n", mode=0o755)
    assert boot(root) == 0
    assert read(root, "/etc/hostname").strip() == "web1"
    assert "web1.example.test" in read(root, "/etc/hosts")
    # between the boots someone edits /etc/hosts and renames the machine
    root.write("/etc/hosts", "127.0.0.1 localhost\n10.9.9.9 stale-entry\n")
    root.write("/etc/hostname", "renamed-by-hand\n")
    first_finished = read(root, "/var/lib/cloudseed/instance/boot-finished")
    capsys.readouterr()
    assert boot(root) == 0
    assert "done NoCloud" in capsys.readouterr().err  # final_message, on the console again
    assert read(root, "/var/lib/cloudseed/instance/boot-finished") != first_finished
    # update_hostname ran again and, as cloud-init's does, keeps a name changed by hand since the
    # name it last set (data/previous-hostname); it would follow a new name from the platform
    assert read(root, "/etc/hostname").strip() == "renamed-by-hand"
    assert read(root, "/var/lib/cloudseed/data/previous-hostname").strip() == "web1"
    hosts = read(root, "/etc/hosts")
    assert "stale-entry" not in hosts and "web1.example.test" in hosts  # update_etc_hosts
    assert lines(root, "/var/tmp/bootcmd.log") == ["boot", "boot"]
    assert lines(root, "/var/tmp/perboot") == ["b", "b"]
    assert lines(root, "/var/tmp/runcmd.log") == ["run"]
    ran = {m["name"]: m["status"] for s in status(root)["v1"].values() if isinstance(s, dict)
           for m in s.get("modules", []) if isinstance(m, dict)}
    assert ran == {"bootcmd": "ok", "update_hostname": "ok", "update_etc_hosts": "ok", "runcmd": "skipped",
                   "scripts_user": "skipped", "scripts_per_boot": "ok", "final_message": "ok"}, ran
