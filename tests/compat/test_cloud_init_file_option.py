"""``--file``/``-f`` of ``init``, ``modules`` and ``single``, as cloud-init 24.x-26.x has it.

cloud-init 24.x moved ``--file`` from before the subcommand onto ``init``, ``modules`` and
``single``: YAML files whose settings win over every other source (system config, vendor-data,
user-data) for that run, the first file winning where several overlap. cloudseed does the same;
the settings are not handed on to later stages (cloud-init merges its configuration anew in each).
One deliberate difference: a file that cannot be read or parsed stops the command with the file
and the problem (exit 1, nothing run), where cloud-init logs it and runs without the file.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.compat.cloud_init_command import boot, ci, seed
from tests.reference import NEW

USER_DATA = "#cloud-config\nwrite_files:\n  - {path: /etc/from-user-data, content: \"user-data\\n\"}\n"


@pytest.fixture
def booted(target):
    seed(target, USER_DATA)
    boot(target)
    return target


def extra(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_single_with_files_the_first_file_wins_over_user_data_for_that_run_only(booted, tmp_path):
    root = booted
    first = extra(tmp_path, "first.yaml", "write_files:\n  - {path: /etc/from-first, content: \"first\\n\"}\n")
    second = extra(tmp_path, "second.yaml", "write_files:\n  - {path: /etc/from-second, content: \"2\\n\"}\n"
                                            "final_message: from the second file\n")
    assert ci(root, "single", "--name", "write_files", "--frequency", "always", "-f", first, "--file", second) == 0
    assert root.read_text("/etc/from-first") == "first\n"
    assert not root.exists("/etc/from-second") and not root.exists("/etc/from-user-data")
    assert ci(root, "single", "--name", "write_files", "--frequency", "always") == 0  # without: user-data's
    assert root.read_text("/etc/from-user-data") == "user-data\n"


def test_modules_with_a_file_that_changes_the_module_list(booted, tmp_path):
    root = booted
    f = extra(tmp_path, "config.yaml", "cloud_config_modules: [write_files]\n"
                                       "write_files:\n  - {path: /etc/from-file, content: \"file\\n\"}\n")
    assert not root.exists("/etc/from-user-data")  # write_files is in no stage's list of this root
    assert ci(root, "modules", "--mode", "config", "--file", f) == 0
    assert root.read_text("/etc/from-file") == "file\n"
    status = json.loads(root.read_text("/run/cloudseed/status.json"))
    assert status["v1"]["modules-config"]["errors"] == []


def test_init_with_a_file_hands_nothing_on_to_the_later_stages(target, tmp_path):
    root = target
    seed(root, USER_DATA)
    f = extra(tmp_path, "init.yaml", "cloud_init_modules: [write_files]\n"
                                     "write_files:\n  - {path: /etc/from-file, content: \"file\\n\"}\n")
    assert ci(root, "init", "--local") == 0
    assert ci(root, "init", "-f", f) == 0
    assert root.read_text("/etc/from-file") == "file\n" and not root.exists("/etc/from-user-data")
    from cloudseed.agent.state import Paths

    combined = root.read_text(Paths(root).combined_config_file)  # what the config and final stages read
    assert "from-user-data" in combined and "from-file" not in combined


@pytest.mark.parametrize("content, problem", [
    (None, "cannot read it: No such file or directory"),
    ("write_files: [\n", "line 2: invalid YAML"),
    ("- just\n- a list\n", "expected a mapping of settings, got list"),
], ids=["missing", "bad-yaml", "not-a-mapping"])
def test_a_file_that_cannot_be_used_stops_the_command_before_it_runs(booted, tmp_path, capsys, content, problem):
    """Deliberately unlike cloud-init (which logs the file's failure and runs without it)."""
    root = booted
    path = str(tmp_path / "extra.yaml") if content is None else extra(tmp_path, "extra.yaml", content)
    before = root.read_text("/run/cloudseed/status.json")
    for argv in (["init"], ["modules", "--mode", "final"], ["single", "--name", "write_files"]):
        capsys.readouterr()
        assert ci(root, *argv, "--file", path) == 1
        err = capsys.readouterr().err
        assert f"cloudseed {argv[0]}: --file {path}" in err and problem in err, err
    assert root.read_text("/run/cloudseed/status.json") == before


def _options(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", help_text.split("options:", 1)[1]))


@pytest.mark.reference
@pytest.mark.parametrize("subcommand", ["init", "modules", "single"])
def test_the_options_are_cloud_init_26s(subcommand, capsys):
    """Each stage subcommand takes the options cloud-init 26.x's takes (``--file``/``-f`` among them),
    and a ``--file`` before the subcommand is a usage error in both (exit 2)."""
    from cloudseed.commands.cloud_init import cloud_init

    theirs = NEW.cli(subcommand, "--help").stdout
    with pytest.raises(SystemExit):
        cloud_init([subcommand, "--help"])
    ours = capsys.readouterr().out
    assert _options(ours) == _options(theirs) and {"--file", "-f"} <= _options(ours), (ours, theirs)
    assert NEW.cli("--file", "extra.yaml", "status", check=False).returncode == 2
    assert cloud_init(["--file", "extra.yaml", "status"]) == 2
