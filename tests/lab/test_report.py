"""The lab report shows status, stage durations and modules for both agents (issue 12.13).

cloudseed's records are made here by a real boot of the agent in a temporary root and its own
``status --format json --long``; cloud-init's are files in the format Debian's cloud-init 22.4
writes (``status.json``, ``result.json`` and the reporting events of ``cloud-init.log``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from cloudseed.lab.boots.session import BootResult, StageTiming
from cloudseed.lab.images.image import Image
from cloudseed.lab.reports.agent_report import modules_from_cloud_init_log, summarize
from cloudseed.lab.reports.report import format_report, report_dict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def recorded(name: str) -> str:
    with open(os.path.join(HERE, "recorded", name)) as f:
        return f.read()


def boot_result(agent: str, **fields) -> BootResult:
    image = Image(disk=f"/images/{agent}.raw", kernel="", initrd="", agent=agent, key=agent)
    return BootResult(accel="tcg", accel_reason="test", image=image, workdir="/w", console_log="/w/console.log",
                      overlay="/w/overlay.qcow2", **fields)


def test_reference_report_has_status_stage_durations_and_modules():
    result = boot_result("reference", status=json.loads(recorded("reference-status.json")),
                         result=json.loads(recorded("reference-result.json")),
                         agent_log=recorded("reference-cloud-init.log"),
                         stages={"local": StageTiming("local", started_at=9.9)})  # its console banner
    data = report_dict(result)
    assert data["status"] == "done"
    assert data["datasource"].startswith("DataSourceNoCloud")
    assert list(data["stages"]) == ["local", "network", "config", "final"]
    assert data["stages"]["network"]["seconds"] == pytest.approx(12.742, abs=0.001)
    assert data["stages"]["local"]["started_at"] == 9.9 and data["stages"]["local"]["seconds"] == pytest.approx(3.853)
    assert result.agent_seconds == pytest.approx(3.853 + 12.742 + 4.769 + 5.311, abs=0.01)
    assert [m["name"] for m in data["modules"]["network"]] == ["seed_random", "write_files", "ssh"]
    assert data["modules"]["network"][2]["seconds"] == pytest.approx(6.05)
    assert data["modules"]["config"][1] == {"name": "grub_dpkg", "status": "ok", "seconds": pytest.approx(1.509),
                                            "reason": ""}
    text = format_report(result)
    assert "status: done" in text
    assert [line.split() for line in text.splitlines() if line.startswith("network ")] == [
        ["network", "-", "-", "12.7s", "3", "0"]]
    modules = text.split("modules:\n", 1)[1]
    assert "  network  ssh" in modules and "6.05s" in modules and "  config   grub_dpkg" in modules


def test_a_failed_cloud_init_module():
    line = ("2025-11-24 20:20:30,640 - handlers.py[DEBUG]: finish: modules-config/config-grub-dpkg: FAIL: "
            "running config-grub-dpkg with frequency once-per-instance")
    assert modules_from_cloud_init_log(line)["config"] == [
        {"name": "grub_dpkg", "status": "failed", "seconds": None,
         "reason": "running config-grub-dpkg with frequency once-per-instance"}]


def test_cloud_init_log_reports_only_the_last_boot():
    log = recorded("reference-cloud-init.log")
    second = log.replace("ran successfully", "previously ran").replace("2025-11-24 20:", "2025-11-25 08:")
    modules = modules_from_cloud_init_log(log + second)
    assert [m["status"] for m in modules["network"]] == ["skipped"] * 3
    assert modules["network"][0]["reason"] == "already ran (frequency)"


@pytest.fixture(scope="module")
def cloudseed_records(tmp_path_factory):
    """A real boot of the agent in a temporary root, and its own status (long JSON) and result."""
    root = tmp_path_factory.mktemp("boot") / "root"
    (root / "etc/cloudseed/cloud.cfg.d").mkdir(parents=True)
    (root / "etc/os-release").write_text("ID=debian\nVERSION_ID=12\n")
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\n")
    (root / "etc/cloudseed/cloud.cfg.d/00-modules.cfg").write_text(
        "network: {config: disabled}\ncloud_init_modules: [write_files, bootcmd]\n"
        "cloud_config_modules: [runcmd]\ncloud_final_modules: [final_message]\n")
    seed = root / "var/lib/cloud/seed/nocloud"
    seed.mkdir(parents=True)
    (seed / "meta-data").write_text("instance-id: iid-report\n")
    (seed / "user-data").write_text("#cloud-config\nwrite_files: [{path: /etc/report, content: r}]\n")
    cli = [sys.executable, "-m", "cloudseed", "--root", str(root)]
    subprocess.run([*cli, "boot"], cwd=REPO, check=True, capture_output=True, timeout=120)
    status = subprocess.run([*cli, "status", "--format", "json", "--long"], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    result = json.loads((root / "run/cloudseed/result.json").read_text())
    raw = json.loads((root / "run/cloudseed/status.json").read_text())
    yield json.loads(status.stdout), result, raw
    shutil.rmtree(root, ignore_errors=True)


def test_cloudseed_report_lists_the_modules_that_ran(cloudseed_records):
    status, result_json, _raw = cloudseed_records
    stages = {name: StageTiming(name, started_at=10.0 + i, finished_at=10.5 + i, seconds=0.4, modules=1)
              for i, name in enumerate(("local", "network", "config", "final"))}
    result = boot_result("cloudseed", status=status, result=result_json, stages=stages)
    text = format_report(result)
    assert "status: done" in text and "datasource: NoCloud" in text
    modules = text.split("modules:\n", 1)[1].split("\n\n")[0].splitlines()
    names = [line.split()[1] for line in modules if not line.strip().startswith("(")]
    assert names[:1] == ["write_files"] and "final_message" in names
    assert any("skipped: no configuration for it" in line for line in modules)  # bootcmd, runcmd: counted


def test_raw_status_files_of_cloudseed_read_like_its_status_command(cloudseed_records):
    status, result_json, raw = cloudseed_records
    from_raw, from_command = summarize(raw, result_json), summarize(status, result_json)
    assert from_raw["status"] == from_command["status"] == "done"
    assert list(from_raw["stages"]) == list(from_command["stages"]) == ["local", "network", "config", "final"]
    assert from_raw["stages"]["network"]["modules"] == from_command["stages"]["network"]["modules"]


def test_no_collected_status_says_so_instead_of_an_empty_section():
    text = format_report(boot_result("cloudseed"))
    assert "modules: - (the agent's status was not collected" in text
    assert "\nmodules:\n\n" not in text and not text.rstrip().endswith("modules:")
