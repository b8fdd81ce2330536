"""The cloud-config validator: keywords, the deepest path of each error, did-you-mean, three kinds of key."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from cloudseed.agent.config.schema import classify_keys, validate_config
from cloudseed.agent.config.validator import Problem, check, close_matches

DEBIAN = {"ID": "debian", "VERSION_ID": "12"}
UBUNTU = {"ID": "ubuntu", "ID_LIKE": "debian"}
ROCKY = {"ID": "rocky", "ID_LIKE": "rhel centos fedora"}


def errors(text: str, os_release=None) -> list[str]:
    cfg = yaml.safe_load(text)
    return [str(p) for p in validate_config(cfg, text, os_release) if p.level == "error"]


def warnings(text: str, os_release=None) -> dict[str, str]:
    cfg = yaml.safe_load(text)
    return {p.path: p.message for p in validate_config(cfg, None, os_release) if p.level == "warning"}


# --- documents cloud-init's documentation accepts (false errors before) ---

def test_ssh_host_keys_by_pattern_are_accepted_and_others_named():
    ok = "ssh_keys:\n  rsa_private: |\n    -----BEGIN RSA PRIVATE KEY-----\n  ed25519_public: ssh-ed25519 AAAA x\n" \
         "  ecdsa_certificate: ecdsa-sha2-nistp256-cert-v01@openssh.com AAAA\n"
    assert errors(ok) == []
    assert errors("ssh_keys:\n  rsa_secret: x\n") == [
        "ssh_keys.rsa_secret (line 2): unknown key (keys here look like "
        "^(rsa|ecdsa|ed25519)_(private|public|certificate)$)"]
    assert errors("ssh_keys:\n  rsa_public: [a]\n") == [
        "ssh_keys.rsa_public (line 2): expected string, got array ['a']"]


def test_write_files_content_as_yaml_binary_is_a_string():
    text = "write_files:\n  - path: /bin/x\n    content: !!binary |\n      f0VMRgIBAQ==\n"
    assert isinstance(yaml.safe_load(text)["write_files"][0]["content"], bytes)
    assert errors(text) == []
    assert errors("write_files:\n  - path: !!binary aGVsbG8=\n") == []  # as cloud-init: bytes are strings
    assert check(b"x", {"type": "integer"}) == [Problem("", "expected integer, got binary <1 bytes>")]


# --- what must be rejected (was accepted) ---

def test_a_users_entry_needs_a_name_and_no_unknown_key():
    assert errors("users:\n  - gecos: Nobody\n") == ["users[0] (line 2): missing required key 'name' (or 'snapuser')"]
    assert errors("users:\n  - name: bob\n    shel: /bin/bash\n") == [
        "users[0].shel (line 3): unknown key (did you mean 'shell'?)"]
    assert errors("users:\n  - default\n  - snapuser: joe@example.com\n") == []


def test_a_bad_field_inside_a_user_is_named_at_its_own_path():
    assert errors("users:\n  - default\n  - name: carl\n    shell: 5\n") == [
        "users[1].shell (line 4): expected string, got integer 5"]
    assert errors("users:\n  - name: d\n    groups: {sudo: x}\n") == [
        "users[0].groups.sudo (line 3): expected null, got string 'x'"]
    # the legacy `user` mapping is checked the same way
    assert errors("user:\n  name: e\n  lock_passwd: 'no'\n") == [
        "user.lock_passwd (line 3): expected boolean, got string 'no'"]


def test_no_fitting_branch_names_every_allowed_type():
    assert errors("users: 3\n") == ["users (line 1): expected array or object or string, got integer 3"]
    assert errors("users:\n  - 5\n") == ["users[0] (line 2): expected array or object or string, got integer 5"]


def test_the_branch_whose_type_matches_is_reported_down_to_its_deepest_problem():
    schema = {"oneOf": [
        {"type": "string"},
        {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}}},
        {"type": "array", "items": {"type": "integer"}},
    ]}
    assert check({"a": {"b": "x"}}, schema) == [Problem("a.b", "expected integer, got string 'x'")]
    assert check([1, "y"], schema) == [Problem("[1]", "expected integer, got string 'y'")]
    # two object branches: the one with fewer problems
    two = {"anyOf": [{"type": "object", "required": ["p", "q"]}, {"type": "object", "required": ["r"]}]}
    assert [p.message for p in check({"x": 1}, two)] == ["missing required key 'r'"]


def test_one_of_must_match_exactly_one_and_any_of_at_least_one():
    overlapping = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert "exactly one" in check(3, overlapping)[0].message
    assert check(3.5, overlapping) == []
    assert check(3, {"anyOf": [{"type": "integer"}, {"type": "number"}]}) == []


def test_deprecations_come_from_the_branch_that_matched():
    schema = {"oneOf": [{"type": "array"},
                        {"type": "string", "deprecated": True, "deprecated_description": "Use a list."}]}
    assert check([], schema) == []
    assert check("x", schema) == [Problem("", "deprecated: Use a list.", "deprecated")]


def test_keywords_the_fragments_need():
    assert [p.message for p in check("", {"type": "string", "minLength": 1})] == ["must not be empty"]
    assert [p.path for p in check([1, 2, 1], {"type": "array", "uniqueItems": True})] == ["[2]"]
    assert check([True, 1], {"uniqueItems": True}) == []  # true is not 1
    names = {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}
    assert [p.path for p in check({"ok": 1, "Bad": 2}, names)] == ["Bad"]
    assert check({}, {"type": "object", "minProperties": 1})[0].message == "must not be empty"
    assert check({"a": 1}, {"type": "object", "maxProperties": 0})[0].message.startswith("has 1 keys")
    assert check([1, 2, 3], {"maxItems": 2})[0].message.startswith("has 3 items")
    assert check(["x", 1], {"items": [{"type": "string"}, {"type": "string"}]})[0].path == "[1]"
    assert check(["x", 1], {"items": [{"type": "string"}], "additionalItems": False})[0].path == "[1]"
    assert check(5, {"const": 5}) == [] and check(True, {"const": 1}) != []
    assert check(True, {"enum": [1]}) != [] and check(1, {"enum": [1]}) == []
    assert check(0, {"type": "integer", "exclusiveMinimum": 0}) != []
    assert check(3, {"allOf": [{"type": "integer"}, {"minimum": 4}]})[0].message == "3 is less than the minimum 4"
    assert check("a", {"not": {"type": "string"}}) != []
    assert check({"a": 1}, {"dependencies": {"a": ["b"]}})[0].message == "'a' needs 'b' too"
    pattern = {"type": "object", "patternProperties": {"^x_": {"type": "integer"}}, "additionalProperties": False}
    assert check({"x_1": 1}, pattern) == []
    assert [p.path for p in check({"x_1": "s", "y": 1}, pattern)] == ["x_1", "y"]


# --- did-you-mean only when close ---

def test_suggestions_only_when_close():
    known = ["datasource", "runcmd", "packages", "write_files", "ssh_pwauth", "apt"]
    assert close_matches("runcmdd", known) == ["runcmd"]
    assert close_matches("pakages", known) == ["packages"]
    assert close_matches("write-files", known) == ["write_files"]
    assert close_matches("ssh_pwuath", known) == ["ssh_pwauth"]  # two letters swapped is one edit
    assert close_matches("apt_sources", known) == []
    assert close_matches("zzz", known) == []
    assert close_matches("ap", known) == []


# --- three kinds of key ---

def test_a_key_cloudseed_implements_gives_nothing():
    assert classify_keys({"runcmd": [], "users": [], "hostname": "x"}, os_release=DEBIAN) == []


def test_a_documented_key_of_a_distro_specific_module_says_why_not_here():
    found = warnings("apk_repos: {}\nlandscape: {}\nzypper: {}\n", DEBIAN)
    assert found["apk_repos"] == ("not done by cloudseed here, because cloudseed's module apk_configure runs only "
                                  "on Alpine: not applicable to debian")
    assert found["landscape"] == ("not done by cloudseed here, because cloudseed's module landscape runs only on "
                                  "Ubuntu: not applicable to debian")
    assert found["zypper"].endswith("not applicable to debian")


def test_on_ubuntu_an_ubuntu_module_is_not_implemented_yet_rather_than_not_applicable():
    from cloudseed.agent.config import schema

    base = schema.build_module_schema()
    # landscape has landed: pretend it is not one of cloudseed's modules
    base["properties"].pop("landscape", None)
    base[schema.DECLARED_BY].pop("landscape", None)
    found = {p.path: p.message for p in classify_keys({"landscape": {}}, base, UBUNTU)}
    assert found["landscape"] == ("not done by cloudseed here, because cloudseed does not implement cloud-init's "
                                  "module landscape yet")


def test_a_documented_key_of_a_module_cloudseed_lacks_says_so(monkeypatch):
    from cloudseed.agent.config import schema

    base = schema.build_module_schema()
    # whichever modules have landed: pretend `puppet` is not one of them
    base["properties"].pop("puppet", None)
    base[schema.DECLARED_BY].pop("puppet", None)
    problems = classify_keys({"puppet": {"install": True}}, base, DEBIAN)
    assert [p.message for p in problems] == [
        "not done by cloudseed here, because cloudseed does not implement cloud-init's module puppet yet"]
    assert problems[0].level == "warning"
    # a key a cloudseed module does not declare although it implements the module
    base[schema.DECLARED_BY]["resize_rootfs"] = ["resizefs", []]
    base["properties"].pop("resize_rootfs_tmp", None)
    assert [p.message for p in classify_keys({"resize_rootfs_tmp": "/run"}, base, DEBIAN)] == [
        "not done by cloudseed here, because cloudseed's module resizefs does not implement `resize_rootfs_tmp`"]


def test_a_key_declared_by_a_cloudseed_module_for_other_distros():
    base = {"properties": {"yum_repos": {"type": "object"}}, "x-declared-by": {"yum_repos": ["yum_add_repo", ["rhel"]]}}
    assert classify_keys({"yum_repos": {}}, base, ROCKY) == []
    (problem,) = classify_keys({"yum_repos": {}}, base, DEBIAN)
    assert problem.message == ("not done by cloudseed here, because cloudseed's module yum_add_repo runs only "
                               "on RHEL: not applicable to debian")


def test_cloud_init_core_settings_and_unknown_keys():
    text = "log_cfgs: []\nrepoting: {}\nfoo_bar_baz: 1\n"
    # in a system configuration file, cloud-init's own settings are at home: not done by cloudseed
    found = {p.path: p.message for p in validate_config(yaml.safe_load(text), None, DEBIAN, user_data=False)
             if p.level == "warning"}
    assert found["log_cfgs"].startswith("not done by cloudseed here, because `log_cfgs` is cloud-init's own setting")
    # an unknown top-level key is an error, as in cloud-init 24.x+ (22.4 let it pass)
    errors = {p.path: p.message for p in validate_config(yaml.safe_load(text), None, DEBIAN) if p.level == "error"}
    assert errors == {"repoting": "unknown key (did you mean 'reporting'?)", "foo_bar_baz": "unknown key",
                      "log_cfgs": "`log_cfgs` is a system configuration setting (cloud-init's Python logging "
                                  "configuration): it belongs in /etc/cloud/cloud.cfg.d/*.cfg, not in user-data "
                                  "(where cloud-init 24.x and later refuse it too)"}


def test_system_info_in_user_data_is_a_deprecation_and_at_home_in_the_system_configuration():
    cfg = {"system_info": {"default_user": {"name": "ops"}}, "users": ["default"]}
    assert [(p.path, p.level, p.message) for p in validate_config(cfg)] == [
        ("system_info", "deprecated", "deprecated since cloud-init 24.2: system and distro settings are not meant "
                                      "to be overridden by user-data or vendor-data")]
    assert validate_config(cfg, user_data=False) == []


# one value of each system configuration setting, as people put them in user-data
SYSTEM_SETTINGS = {"network": {"config": "disabled"}, "datasource": {"NoCloud": {}}, "datasource_list": ["NoCloud"],
                   "vendor_data2": {"enabled": False}, "manual_cache_clean": True, "_doc": "notes",
                   "log_cfgs": [], "def_log_file": "/var/log/x.log", "syslog_fix_perms": ["root:root"],
                   "disable_network_activation": True, "allow_userdata": False,
                   "disable_vmware_customization": True}


def test_system_settings_in_user_data_are_errors_naming_the_key_and_where_it_belongs():
    from cloudseed.agent.config.known_keys import SYSTEM_ONLY_KEYS

    assert set(SYSTEM_SETTINGS) == SYSTEM_ONLY_KEYS
    for key, value in SYSTEM_SETTINGS.items():
        text = f"{key}: {json.dumps(value)}\nhostname: box1\n"
        found = [(p.path, p.line, p.message) for p in validate_config({key: value, "hostname": "box1"}, text)
                 if p.level == "error"]
        assert len(found) == 1 and found[0][:2] == (key, 1), found
        assert f"`{key}` is a system configuration setting" in found[0][2]
        assert "belongs in /etc/cloud/cloud.cfg.d/*.cfg, not in user-data" in found[0][2]
        # the same setting in a system configuration file is no error
        assert [p for p in validate_config({key: value}, user_data=False) if p.level == "error"] == [], key


@pytest.mark.reference
@pytest.mark.oracle("new")
def test_system_settings_in_user_data_are_refused_by_the_newer_release_too(oracle, tmp_path):
    """cloud-init 26.x's user-data schema refuses each of them (22.4 let any top-level key pass)."""
    for key, value in SYSTEM_SETTINGS.items():
        f = tmp_path / f"{key}.yaml"
        f.write_text(f"#cloud-config\n{key}: {json.dumps(value)}\n")
        proc = oracle.cli("schema", "-c", str(f), check=False)
        assert proc.returncode == 1 and f"{key}: Additional properties are not allowed" in proc.stdout + proc.stderr, \
            (key, proc.stdout + proc.stderr)
        ours = subprocess.run([sys.executable, "-m", "cloudseed", "schema", "-c", str(f)], capture_output=True,
                              text=True)
        assert ours.returncode == 1, (key, ours.stdout)


def test_type_errors_read_the_same_on_the_terminal_and_at_boot():
    cfg = {"hostname": 3, "runcmd": None, "users": [{"name": "a", "shell": ["x"]}]}
    on_terminal = sorted(p.message for p in validate_config(cfg) if p.level == "error")
    at_boot = sorted(p.message for p in validate_config(cfg, show_values=False) if p.level == "error")
    assert on_terminal == ["expected array, got null", "expected string, got array ['x']",
                           "expected string, got integer 3"]
    # the world-readable status names types only, never "got integer a integer value"
    assert at_boot == ["expected array, got null", "expected string, got array", "expected string, got integer"]


def test_a_key_several_modules_declare_is_reported_once():
    assert [p.path for p in validate_config({"hostname": 3}) if p.level == "error"] == ["hostname"]


def test_hyphenated_user_keys_are_deprecations_not_unknown_keys():
    """``ssh-authorized-keys``, ``no-create-home``...: cloud-init and cloudseed both apply them."""
    cfg = {"users": [{"name": "a", "ssh-authorized-keys": ["ssh-ed25519 AAAA a@b"], "no-create-home": True,
                      "lock-passwd": False, "primary-group": "a"}]}
    found = {p.path: (p.level, p.message) for p in validate_config(cfg)}
    assert found == {
        "users[0].ssh-authorized-keys": ("deprecated", "deprecated since cloud-init 18.3: Use ssh_authorized_keys."),
        "users[0].no-create-home": ("deprecated", "deprecated since cloud-init 24.2: Use no_create_home."),
        "users[0].lock-passwd": ("deprecated", "deprecated since cloud-init 22.3: Use lock_passwd."),
        "users[0].primary-group": ("deprecated", "deprecated since cloud-init 24.2: Use primary_group."),
    }
    # a real typo still gets its did-you-mean
    (typo,) = [p for p in validate_config({"users": [{"name": "a", "ssh_authorized_kyes": ["k"]}]})
               if p.level == "error"]
    assert typo.message == "unknown key (did you mean 'ssh_authorized_keys'?)"


def test_every_key_of_cloud_inits_schema_is_known():
    """Facts check: every top-level key of the reference's schema is implemented or in the table."""
    from cloudseed.agent.config.known_keys import CORE_KEYS, MODULES
    from cloudseed.agent.config.schema import module_schema

    path = os.path.join(os.path.expanduser(os.environ.get("CLOUDSEED_CACHE", "~/.cache/cloudseed")), "reference",
                        "usr/lib/python3/dist-packages/cloudinit/config/schemas/schema-cloud-config-v1.json")
    if not os.path.exists(path):
        pytest.skip("the reference is not unpacked (tests/reference.py fetches it)")
    with open(path) as f:
        defs = json.load(f)["$defs"]
    documented = {k for name, d in defs.items() if name.startswith(("cc_", "base_config", "reporting_config"))
                  for k in d.get("properties", {})}
    assert len(documented) > 80
    table = {k for facts in MODULES.values() for k in facts["keys"]} | set(CORE_KEYS)
    implemented = set(module_schema()["properties"])
    missing = sorted(documented - table - implemented)
    assert missing == []
    cc_modules = {name[3:] for name in defs if name.startswith("cc_")}
    assert cc_modules - {"ubuntu_advantage"} <= set(MODULES)


# --- at boot ---

def test_boot_status_is_degraded_naming_a_key_not_done_here(shell_target):
    from tests.agent.boot_support import boot, seed, status

    root = shell_target
    seed(root, "instance-id: iid-keys\n",
         user="#cloud-config\nruncmd: [echo hi]\napk_repos:\n  alpine_repo: {version: v3.18}\nrumcmd: []\n")
    assert boot(root) == 0  # no error: the boot is done, degraded by the warnings
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "--root", root.top, "status"],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    text = json.dumps(status(root))
    assert "apk_repos: not done by cloudseed here, because cloudseed's module apk_configure runs only on Alpine: " \
           "not applicable to debian" in text
    assert "rumcmd: unknown key (did you mean 'runcmd'?)" in text


def test_schema_command_exit_codes_and_messages(tmp_path):
    f = tmp_path / "u.yaml"
    f.write_text("#cloud-config\nssh_keys:\n  rsa_public: ssh-rsa AAAA\n")
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "schema", "-c", str(f)], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "valid\n", proc.stdout
    # a system configuration setting in user-data is an error, as in cloud-init 24.x+
    f.write_text("#cloud-config\nsyslog_fix_perms: [x]\n")
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "schema", "-c", str(f)], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout
    assert f"{f}:2: error: syslog_fix_perms: `syslog_fix_perms` is a system configuration setting" in proc.stdout
    f.write_text("#cloud-config\nusers:\n  - name: x\n    shell: [bash]\n")
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "schema", "-c", str(f)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert f"{f}:4: error: users[0].shell: expected string, got array ['bash']" in proc.stdout


# user-data that is not cloud-config, each kind as people write it (first line decides)
NOT_CLOUD_CONFIG = {
    "script.sh": "#!/bin/bash\n#cloud-config\necho set up\n",
    "include.txt": "#include\nhttps://example.invalid/user-data\n",
    "boothook.txt": "#cloud-boothook\necho early\n",
    "archive.txt": "#cloud-config-archive\n- type: text/cloud-config\n  content: 'runcmd: [ls]'\n",
}


def test_schema_of_user_data_that_is_not_cloud_config_is_nothing_to_check(tmp_path):
    for name, text in NOT_CLOUD_CONFIG.items():
        f = tmp_path / name
        f.write_text(text)
        proc = subprocess.run([sys.executable, "-m", "cloudseed", "schema", "-c", str(f)], capture_output=True,
                              text=True)
        assert proc.returncode == 0, (name, proc.stdout)
        assert proc.stdout.startswith(f"{f}: user-data of type text/"), proc.stdout
        assert "nothing to check" in proc.stdout, proc.stdout
    # a document with no header at all is still refused
    f = tmp_path / "plain.yaml"
    f.write_text("runcmd: []\n")
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "schema", "-c", str(f)], capture_output=True, text=True)
    assert proc.returncode == 1 and "first line must be '#cloud-config'" in proc.stdout


@pytest.mark.reference
@pytest.mark.oracle("new")
def test_schema_exit_codes_for_user_data_that_is_not_cloud_config_are_the_newer_releases(oracle, tmp_path):
    """cloud-init 26.x says such user-data is "not currently evaluated" and exits 0 (22.4 refused it)."""
    for name, text in {**NOT_CLOUD_CONFIG, "plain.yaml": "runcmd: []\n"}.items():
        f = tmp_path / name
        f.write_text(text)
        theirs = oracle.cli("schema", "-c", str(f), check=False)
        ours = subprocess.run([sys.executable, "-m", "cloudseed", "schema", "-c", str(f)], capture_output=True,
                              text=True)
        assert ours.returncode == theirs.returncode, (name, ours.stdout, theirs.stdout + theirs.stderr)


def test_system_mode_names_the_targets_distro(target):
    target.write("/etc/cloudseed/cloud.cfg.d/50-x.cfg", "zypper: {repos: []}\n")
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "--root", target.top, "schema", "--system"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "zypper: not done by cloudseed here" in proc.stdout and "not applicable to debian" in proc.stdout


def test_system_mode_takes_system_settings_in_configuration_files_but_not_in_user_data(target):
    target.write("/etc/cloudseed/cloud.cfg.d/50-x.cfg", "network: {config: disabled}\ndatasource_list: [NoCloud]\n")
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "--root", target.top, "schema", "--system"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "error" not in proc.stdout, proc.stdout + proc.stderr
    target.write("/var/lib/cloudseed/instance/user-data.txt", "#cloud-config\nnetwork: {config: disabled}\n")
    proc = subprocess.run([sys.executable, "-m", "cloudseed", "--root", target.top, "schema", "--system"],
                          capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "user-data.txt:2: error: network: `network` is a system configuration setting" in proc.stdout


def test_modules_status_page_is_up_to_date():
    """docs/modules-status.md is ``cloudseed schema --modules-table``; regenerate it when a module lands."""
    from cloudseed.commands.schema import modules_table

    page = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "modules-status.md")
    with open(page) as f:
        assert f.read() == modules_table(), \
            "regenerate: .venv/bin/cloudseed schema --modules-table > docs/modules-status.md"


def test_modules_status_page_covers_every_cloud_init_module():
    from cloudseed.agent.config.known_keys import MODULES
    from cloudseed.commands.schema import modules_table

    page = modules_table()
    assert len(MODULES) >= 60
    for name in MODULES:
        assert f"\n| {name} |" in page
    assert "| apk_configure | config | implemented | Alpine | alpine | `apk_repos` |" in page
    assert "| write_files | init | implemented |" in page
