"""Bad input never bricks a boot: every stage completes and status says what went wrong and where."""

from __future__ import annotations

import gzip
import json
import os

from tests.agent.boot_support import boot, lines, read, seed, status


def all_stages_finished(root) -> bool:
    v1 = status(root)["v1"]
    return all(v1[k]["finished"] for k in ("init-local", "init", "modules-config", "modules-final"))


def errors(root) -> list[str]:
    return json.loads(read(root, "/run/cloudseed/result.json"))["v1"]["errors"]


def warnings(root) -> list[str]:
    return json.loads(read(root, "/run/cloudseed/result.json"))["v1"]["warnings"]


def test_invalid_yaml_is_reported_with_its_line_and_boot_finishes(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-bad-yaml\n", user="#cloud-config\nruncmd:\n  - echo a\n bad: [unclosed\n")
    boot(root)
    assert all_stages_finished(root)
    problems = " ".join(errors(root))
    assert "line" in problems and "user-data" in problems
    # the rest of the boot still ran: the final message marked the boot finished
    assert root.exists("/var/lib/cloudseed/instances/iid-bad-yaml/boot-finished")


def test_wrong_type_for_a_known_key_is_a_warning_not_a_stop(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-type\n",
         user="#cloud-config\nwrite_files: not-a-list\nruncmd:\n  - echo ran >> /var/tmp/ran\n")
    boot(root)
    assert all_stages_finished(root)
    assert any("write_files" in w and "expected array" in w for w in warnings(root))
    assert any(e.startswith("write_files") for e in errors(root))
    assert lines(root, "/var/tmp/ran") == ["ran"]  # unrelated modules still applied


def test_failing_script_is_recorded_and_the_others_run(shell_target):
    root = shell_target
    ud = ("#cloud-config\nruncmd:\n  - exit 1\nwrite_files:\n  - path: /etc/still-written\n    content: x\n")
    seed(root, "instance-id: iid-fail\n", user=ud)
    root.write("/var/lib/cloudseed/scripts/per-boot/20-ok", "#!/bin/sh\necho ok > /var/tmp/ok\n", mode=0o755)
    assert boot(root) == 1
    assert all_stages_finished(root)
    assert any("scripts_user" in e and "exit 1" in e for e in errors(root))
    assert read(root, "/etc/still-written") == "x"
    assert lines(root, "/var/tmp/ok") == ["ok"]
    summary = root.run(["/bin/sh", "-c", "true"])  # the root is still usable
    assert summary.returncode == 0


def test_binary_blob_user_data(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-bin\n", user=os.urandom(4096))
    boot(root)
    assert all_stages_finished(root)


def test_gzipped_user_data_is_unpacked(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-gz\n",
         user=gzip.compress(b"#cloud-config\nwrite_files:\n  - path: /etc/gz\n    content: gz\n"))
    boot(root)
    assert read(root, "/etc/gz") == "gz"


def test_empty_user_data(shell_target):
    root = shell_target
    seed(root, "instance-id: iid-empty\n", user="")
    assert boot(root) == 0
    assert all_stages_finished(root)
    assert errors(root) == []


def test_ten_megabyte_user_data(shell_target):
    root = shell_target
    big = "#cloud-config\nwrite_files:\n  - path: /etc/big\n    content: |\n" + ("      " + "x" * 1000 + "\n") * 10_000
    seed(root, "instance-id: iid-big\n", user=big)
    boot(root)
    assert all_stages_finished(root)
    assert len(root.read_bytes("/etc/big")) > 10_000_000


def test_missing_meta_data_still_boots_with_a_warning(shell_target):
    root = shell_target
    root.write("/var/lib/cloud/seed/nocloud/user-data", "#cloud-config\nwrite_files:\n  - path: /etc/nm\n"
               "    content: nm\n")
    boot(root)
    assert all_stages_finished(root)
    assert read(root, "/etc/nm") == "nm"
    assert any("no meta-data" in w for w in warnings(root))


def test_broken_system_config_file_is_named_and_skipped(shell_target):
    root = shell_target
    root.write("/etc/cloud/cloud.cfg.d/99-broken.cfg", "datasource_list: [NoCloud\n")
    seed(root, "instance-id: iid-cfg\n")
    boot(root)
    assert all_stages_finished(root)
    assert any("99-broken.cfg" in e and "line" in e for e in errors(root))
    assert lines(root, "/var/tmp/runcmd.log") == ["run"]


def test_no_datasource_at_all_falls_back_to_none(shell_target):
    from tests.agent.boot_support import CORE_MODULES

    root = shell_target
    root.write("/etc/cloudseed/cloud.cfg.d/00-core-modules.cfg", CORE_MODULES)
    assert boot(root) == 0
    assert all_stages_finished(root)
    assert status(root)["v1"]["datasource"] == "None"
    assert any("no datasource" in w for w in warnings(root))
