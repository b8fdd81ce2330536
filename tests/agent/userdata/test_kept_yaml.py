"""Cloud-config parsed once per instance (``kept_yaml.py``): what is kept, what is parsed again,
and that a reboot of an unchanged instance processes its user-data without loading PyYAML."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cloudseed.agent.userdata import process_userdata
from cloudseed.agent.userdata.kept_yaml import InvalidYaml, KeptYaml, load_cloud_config_yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = os.path.join(REPO, ".venv", "bin", "cloudseed")


def test_a_document_json_holds_is_kept_and_given_back_as_a_fresh_copy():
    kept = KeptYaml()
    text = "packages: [vim]\nwrite_files:\n  - {path: /etc/x, content: 'a', permissions: '0644'}\nn: 1.5\nb: yes\n"
    first = load_cloud_config_yaml(text, kept)
    again = KeptYaml(kept.text())
    second = load_cloud_config_yaml(text, again)
    assert first == second == {"packages": ["vim"], "n": 1.5, "b": True,
                               "write_files": [{"path": "/etc/x", "content": "a", "permissions": "0644"}]}
    second["packages"].append("changed")
    assert load_cloud_config_yaml(text, again)["packages"] == ["vim"]  # a copy each time: merging mutates


@pytest.mark.parametrize("text", [
    "when: 2024-01-02\n",             # a date
    "blob: !!binary aGVsbG8=\n",      # bytes
    "1: one\n",                        # an integer key
    "s: !!set {a, b}\n",               # a set
    "x: .nan\n",                       # NaN is not equal to itself
], ids=["date", "binary", "int key", "set", "nan"])
def test_a_document_json_cannot_hold_exactly_is_parsed_every_time(text):
    kept = KeptYaml()
    load_cloud_config_yaml(text, kept)
    assert json.loads(kept.text())["entries"] == {}


def test_changed_text_is_parsed_again_and_unused_entries_drop_out():
    kept = KeptYaml()
    load_cloud_config_yaml("a: 1\n", kept)
    later = KeptYaml(kept.text())
    assert load_cloud_config_yaml("a: 2\n", later) == {"a": 2}
    assert list(json.loads(later.text())["entries"]) == ["a: 2\n"]


@pytest.mark.parametrize("saved", [b"{not json", b'{"format": 99, "entries": {"a: 1\\n": "{\\"a\\": 5}"}}',
                                   b'{"format": 1, "entries": {"a: 1\\n": "{broken"}}'],
                         ids=["damaged", "unknown format", "damaged entry"])
def test_a_damaged_or_unknown_file_means_parsing_again(saved):
    assert load_cloud_config_yaml("a: 1\n", KeptYaml(saved)) == {"a": 1}


def test_invalid_yaml_is_reported_as_before_with_where():
    with pytest.raises(InvalidYaml, match="line 2"):
        load_cloud_config_yaml("a: 1\n  b: [\n", KeptYaml())
    result = process_userdata(b"#cloud-config\na: [1\n", kept_yaml=KeptYaml())
    assert any("invalid YAML, part ignored" in e for e in result.errors)


def test_a_reboot_of_the_same_instance_loads_no_pyyaml(target):
    """First boot: the instance's cloud-config is parsed and kept (0600, it is user-data); the
    reboot (a fresh process, /run emptied) merges the same config without importing yaml."""
    target.write("/etc/cloudseed/cloud.cfg.d/00-modules.cfg",
                 "network:\n  config: disabled\ncloud_init_modules:\n  - write_files\n"
                 "cloud_config_modules:\n  - runcmd\ncloud_final_modules:\n  - final_message\n")
    target.write("/var/lib/cloud/seed/nocloud/meta-data", "instance-id: iid-kept\n")
    target.write("/var/lib/cloud/seed/nocloud/user-data",
                 "#cloud-config\nwrite_files:\n  - path: /etc/kept\n    content: k\nruncmd: [[echo, hi]]\n")
    first = subprocess.run([CLI, "--root", target.top, "boot"], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    kept_file = target.top + "/var/lib/cloudseed/instances/iid-kept/cloud-config.parsed.json"
    assert oct(os.stat(kept_file).st_mode & 0o777) == "0o600"
    assert json.loads(target.read_text("/var/lib/cloudseed/instances/iid-kept/cloud-config.parsed.json"))["entries"]
    target.remove_tree("/run/cloudseed")
    code = f"""
import json, sys
from cloudseed.core.root import TargetRoot
from cloudseed.agent.boot.performance import preload_later_stages
from cloudseed.agent.boot.stages import BootState, run_local, run_modules, run_network
state = BootState.load(TargetRoot({target.top!r}))
codes = [run_local(state)]
preload_later_stages(state)  # as the boot's process does while networking comes up
preloaded = "yaml" in sys.modules
codes += [run_network(state), run_modules(state, "config"), run_modules(state, "final")]
print(json.dumps([max(codes), preloaded, "yaml" in sys.modules]))
"""
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert again.returncode == 0, again.stderr
    code, preloaded, yaml_loaded = json.loads(again.stdout.strip().splitlines()[-1])
    assert code == 0 and preloaded is False and yaml_loaded is False
    assert target.read_text("/etc/kept") == "k"
    combined = json.loads(target.read_text("/var/lib/cloudseed/instances/iid-kept/cloud-config.json"))
    assert combined["runcmd"] == [["echo", "hi"]]
