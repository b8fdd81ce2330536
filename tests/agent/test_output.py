"""The ``output`` key: each stage's stdout/stderr to a file or a command (cloud-init's ``output:``).

Stages run against a chrooted busybox root (``shell_target``), so ``| tee -a FILE`` is a real
command on the target writing inside the root.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from cloudseed.agent.state.output import targets

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODULES = """\
network: {config: disabled}
cloud_init_modules: [write_files]
cloud_config_modules: [runcmd]
cloud_final_modules: [final_message]
"""


def boot_with(root, user_data: str, separate: bool = False) -> int:
    """A boot by the real commands, each its own process (stdout/stderr are the process's fds)."""
    root.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg", MODULES)
    root.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-output\n")
    root.write("/var/lib/cloud/seed/nocloud/user-data", user_data)
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    steps = [["init", "--local"], ["init"], ["modules", "--mode", "config"], ["modules", "--mode", "final"]]
    codes = []
    for step in (steps if separate else [["boot"]]):
        proc = subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, *step], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert "Traceback" not in proc.stderr, proc.stderr
        codes.append(proc.returncode)
    return max(codes)


@pytest.fixture
def tee_root(shell_target):
    os.symlink("busybox", os.path.join(shell_target.top, "bin/tee"))
    return shell_target


@pytest.mark.parametrize("separate", [False, True], ids=["one-process", "one-process-per-stage"])
def test_all_stages_through_a_real_tee_command(tee_root, separate):
    root = tee_root
    code = boot_with(root, '#cloud-config\noutput: {all: "| tee -a /var/log/stages.log"}\n'
                           'final_message: "the final word"\n', separate)
    assert code == 0
    text = root.read_text("/var/log/stages.log")
    # the network stage learns of the key from user-data: from then on its output is captured
    assert "stage network finished" in text
    for stage in ("config", "final"):
        assert f"stage {stage} start" in text and f"stage {stage} finished" in text
    assert "the final word" in text
    assert text.count("stage final finished") == 1  # each stage's command saw its input end once


def test_files_per_stage_list_and_mapping_forms(shell_target):
    root = shell_target
    root.write("/var/log/c.err", "old content\n")
    user_data = ("#cloud-config\noutput:\n"
                 "  config: ['>> /var/log/c.out', '> /var/log/c.err']\n"
                 "  final: {output: /var/log/f.log, error: '&1'}\n")
    assert boot_with(root, user_data) == 0
    c_err = root.read_text("/var/log/c.err")
    assert "old content" not in c_err and "stage config finished" in c_err  # ">": truncated first
    assert "stage final" not in c_err  # the final stage has its own target
    assert root.exists("/var/log/c.out")
    assert "stage final finished" in root.read_text("/var/log/f.log")  # a bare path appends; &1 follows stdout
    assert stat.S_IMODE(root.stat("/var/log/f.log").st_mode) == 0o640


def test_bad_output_values_are_warnings_and_the_boot_goes_on(shell_target):
    root = shell_target
    assert boot_with(root, "#cloud-config\noutput: {all: [1, 2, 3], final: '> relative/path'}\n") in (0, 2)
    status = json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]
    config_warnings = " ".join(status["modules-config"]["warnings"])
    final_warnings = " ".join(status["modules-final"]["warnings"])
    assert "output.all: a list is [stdout, stderr], got 3 items" in config_warnings
    assert "absolute path" in final_warnings and "relative/path" in final_warnings
    assert status["modules-final"]["finished"]


def test_targets_follow_cloud_init_rules():
    assert targets({}, "init") == (None, None)
    assert targets({"output": {"all": "| tee -a /l"}}, "config") == ("| tee -a /l", "| tee -a /l")
    assert targets({"output": {"all": ">/a", "init": "/b"}}, "init") == (">> /b", ">> /b")
    assert targets({"output": {"all": ">/a", "init": "/b"}}, "final") == ("> /a", "> /a")
    assert targets({"output": {"final": ["> /o"]}}, "final") == ("> /o", None)
    assert targets({"output": {"final": {"error": "/e"}}}, "final") == (None, ">> /e")
    with pytest.raises(ValueError, match="output: expected a mapping"):
        targets({"output": "> /x"}, "init")


def test_output_is_a_known_key_in_the_schema():
    from cloudseed.agent.config.schema import validate_config

    good = {"output": {"all": "| tee -a /var/log/cloud-init-output.log", "final": [">> /f", None],
                       "init": {"output": "> /i", "error": "&1"}}}
    assert [str(p) for p in validate_config(good)] == []
    assert validate_config({"output": {"everything": "> /x"}})  # not one of all/init/config/final
