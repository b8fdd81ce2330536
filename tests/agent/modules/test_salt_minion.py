"""salt_minion: the minion's configuration, grains and keys, the package and the service.

Salt is not in Debian 12's archive (``apt-cache policy salt-minion`` has no candidate), so
``salt-call --local test.ping`` cannot run here: these tests read back the files the module
writes (the YAML loaded as Salt loads it, modes and owners) and the exact commands it runs,
through a chrooted root whose apt-get and systemctl are recording scripts.
"""

from __future__ import annotations

import logging
import os
import stat

import pytest
import yaml

from tests.agent.modules.cm_support import apt_recorder, calls, recorder
from tests.agent.modules.module_support import run

PUBLIC = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqPUBLICPUBLIC\n-----END PUBLIC KEY-----\n"
PRIVATE = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowSECRETSECRETSECRET\n-----END RSA PRIVATE KEY-----\n"


def _mode(root, path: str) -> int:
    return stat.S_IMODE(root.stat(path).st_mode)


def _tools(root, systemctl_body: str = "", systemctl_status: int = 0) -> None:
    apt_recorder(root)
    recorder(root, "systemctl", systemctl_body, systemctl_status)


def test_configuration_grains_and_keys_are_written_and_the_service_enabled(shell_target, caplog):
    root = shell_target
    _tools(root)
    caplog.set_level(logging.DEBUG)
    cfg = {"salt_minion": {"conf": {"master": "salt.example.com", "id": "web-01", "file_client": "remote"},
                           "grains": {"role": ["web", "db"], "dc": "par1"},
                           "public_key": PUBLIC, "private_key": PRIVATE}}
    result, ctx = run(root, "salt_minion", cfg, stage="final")
    assert result.status == "ok", result.reason
    assert yaml.safe_load(root.read_text("/etc/salt/minion")) == cfg["salt_minion"]["conf"]
    assert yaml.safe_load(root.read_text("/etc/salt/grains")) == cfg["salt_minion"]["grains"]
    # no /etc/salt/pki/minion in the image: the keys go to /etc/salt/pki, as cloud-init does
    assert root.read_text("/etc/salt/pki/minion.pem") == PRIVATE
    assert root.read_text("/etc/salt/pki/minion.pub") == PUBLIC
    assert _mode(root, "/etc/salt/pki/minion.pem") == 0o600 and _mode(root, "/etc/salt/pki/minion.pub") == 0o644
    assert _mode(root, "/etc/salt/pki") == 0o700
    assert root.stat("/etc/salt/pki/minion.pem").st_uid == 0
    assert _mode(root, "/etc/salt/minion") == 0o644
    assert calls(root) == [
        "apt-get --option=Dpkg::Options::=--force-confold --option=Dpkg::options::=--force-unsafe-io "
        "--assume-yes --quiet update",
        "apt-get --option=Dpkg::Options::=--force-confold --option=Dpkg::options::=--force-unsafe-io "
        "--assume-yes --quiet install salt-minion",
        "systemctl --quiet enable salt-minion",  # offline root: enabled, not restarted
    ]
    assert "SECRETSECRET" not in caplog.text and "SECRETSECRET" not in result.reason


def test_custom_names_and_the_existing_pki_minion_directory(shell_target):
    root = shell_target
    _tools(root)
    root.makedirs("/srv/salt/pki/minion")
    result, _ = run(root, "salt_minion", {"salt_minion": {
        "pkg_name": "salt-minion-3006", "service_name": "salt-minion@main", "config_dir": "/srv/salt",
        "conf": {"master": "10.0.0.2"}, "public_key": PUBLIC, "private_key": PRIVATE}}, stage="final")
    assert result.status == "ok", result.reason
    assert root.read_text("/srv/salt/pki/minion/minion.pem") == PRIVATE
    assert yaml.safe_load(root.read_text("/srv/salt/minion")) == {"master": "10.0.0.2"}
    assert calls(root)[1].endswith("install salt-minion-3006")
    assert calls(root)[2] == "systemctl --quiet enable salt-minion@main"


def test_explicit_pki_dir(shell_target):
    root = shell_target
    _tools(root)
    result, _ = run(root, "salt_minion", {"salt_minion": {"public_key": PUBLIC, "private_key": PRIVATE,
                                                          "pki_dir": "/var/lib/salt/keys"}}, stage="final")
    assert result.status == "ok", result.reason
    assert _mode(root, "/var/lib/salt/keys/minion.pem") == 0o600
    assert not root.exists("/etc/salt/minion")  # no conf given: no minion file


def test_restarted_where_systemd_runs(shell_target):
    root = shell_target
    _tools(root)
    root.makedirs("/run/systemd/system")
    result, _ = run(root, "salt_minion", {"salt_minion": {"conf": {"master": "m"}}}, stage="final")
    assert result.status == "ok", result.reason
    assert calls(root)[-2:] == ["systemctl enable salt-minion", "systemctl restart salt-minion"]


def test_a_failing_restart_is_named(shell_target):
    root = shell_target
    _tools(root, 'case "$1" in restart) echo "Job for salt-minion.service failed." >&2; exit 1;; esac')
    root.makedirs("/run/systemd/system")
    result, _ = run(root, "salt_minion", {"salt_minion": {"conf": {"master": "m"}}}, stage="final")
    assert result.status == "failed"
    assert "salt_minion: restarting salt-minion failed: Job for salt-minion.service failed." in result.reason
    assert yaml.safe_load(root.read_text("/etc/salt/minion")) == {"master": "m"}  # whole, not half-written


def test_package_not_installable_names_what_to_do_and_writes_nothing(shell_target):
    root = shell_target
    apt_recorder(root, failing="salt-minion")
    recorder(root, "systemctl")
    result, _ = run(root, "salt_minion", {"salt_minion": {"conf": {"master": "m"}, "public_key": PUBLIC,
                                                          "private_key": PRIVATE}}, stage="final")
    assert result.status == "failed"
    assert "installing salt-minion" in result.reason and "E: Unable to locate package salt-minion" in result.reason
    assert "apt.sources" in result.reason
    assert not root.exists("/etc/salt")


def test_no_package_manager_at_all(target):
    result, _ = run(target, "salt_minion", {"salt_minion": {"conf": {"master": "m"}}}, stage="final")
    assert result.status == "failed" and result.reason.startswith("salt_minion: installing salt-minion")
    assert not target.exists("/etc/salt")


def test_wrong_types_are_named_before_anything_is_done(shell_target):
    root = shell_target
    _tools(root)
    for cfg, message in (
        ({"conf": "master: m"}, "salt_minion.conf: expected object"),
        ({"private_key": ["a", "b"], "public_key": PUBLIC}, "salt_minion.private_key: expected string"),
        ({"conf": {}, "unknown": 1}, "salt_minion.unknown"),
        ({"public_key": PUBLIC}, "salt_minion.public_key: given without salt_minion.private_key"),
        ({"config_dir": "etc/salt"}, "salt_minion.config_dir: expected an absolute path"),
    ):
        result, _ = run(root, "salt_minion", {"salt_minion": cfg}, stage="final")
        assert result.status == "failed" and message in result.reason, (cfg, result.reason)
    assert calls(root) == [] and not root.exists("/etc/salt")


SALT_DOCUMENTS = [
    {"conf": {"master": "salt.example.com"}},
    {"conf": {"master": ["m1", "m2"], "id": "web-01", "startup_states": "highstate"},
     "grains": {"role": ["web"], "dc": "par1"}},
    {"pkg_name": "salt-minion-3006", "service_name": "salt-minion@x", "config_dir": "/srv/salt",
     "grains": {"nested": {"a": 1, "b": [True, None]}}, "public_key": PUBLIC, "private_key": PRIVATE},
    {"public_key": PUBLIC, "private_key": PRIVATE, "pki_dir": "/var/lib/salt/keys"},
    {"conf": {"master": "10.0.0.2", "master_port": 4506, "log_level": "warning", "mine_functions": {
        "network.ip_addrs": [{"interface": "eth0"}]}}, "grains": {"roles": ["db", "backup"], "tier": 2}},
    {"service_name": "salt-minion", "conf": {"file_client": "local", "file_roots": {"base": ["/srv/salt"]}}},
]


@pytest.mark.reference
@pytest.mark.parametrize("document", SALT_DOCUMENTS, ids=range(len(SALT_DOCUMENTS)))
def test_same_files_and_commands_as_cloud_init(shell_target, tmp_path, document):
    """The same minion/grains YAML, keys and package as cloud-init 22.4's module; deliberate
    differences: the service is enabled (and restarted only where systemd runs) with systemctl where
    cloud-init calls ``service NAME restart``, and the public key is 0644 (cloud-init: 0600)."""
    from tests.agent.modules.cm_support import reference_run

    top, ref_commands = reference_run(tmp_path, "salt_minion", {"salt_minion": document})
    root = shell_target
    _tools(root)
    root.makedirs("/run/systemd/system")
    result, _ = run(root, "salt_minion", {"salt_minion": document}, stage="final")
    assert result.status == "ok", result.reason
    config_dir = document.get("config_dir", "/etc/salt")
    for name in ("minion", "grains"):
        ref_path = os.path.join(top, config_dir.lstrip("/"), name)
        assert os.path.exists(ref_path) == root.exists(f"{config_dir}/{name}")
        if os.path.exists(ref_path):
            with open(ref_path) as handle:
                assert yaml.safe_load(root.read_text(f"{config_dir}/{name}")) == yaml.safe_load(handle)
    pki = document.get("pki_dir", f"{config_dir}/pki")
    for name in ("minion.pem", "minion.pub"):
        ref_path = os.path.join(top, pki.lstrip("/"), name)
        assert os.path.exists(ref_path) == root.exists(f"{pki}/{name}")
        if os.path.exists(ref_path):
            with open(ref_path) as handle:
                assert root.read_text(f"{pki}/{name}") == handle.read()
    package = document.get("pkg_name", "salt-minion")
    service = document.get("service_name", "salt-minion")
    assert ref_commands == [["install", package], ["service", service, "restart"]]
    assert calls(root)[1].endswith(f" install {package}")
    assert calls(root)[2:] == [f"systemctl enable {service}", f"systemctl restart {service}"]


def test_a_failing_salt_minion_does_not_stop_the_stage(shell_target):
    """The final stage's configuration-management modules in cloud-init's order: salt_minion fails
    (its package is not installable), the failure is named and the modules after it still run."""
    from cloudseed.agent.modules import ModuleContext, run_stage_modules
    from cloudseed.agent.state import Paths

    root = shell_target
    apt_recorder(root, failing="salt-minion")
    recorder(root, "systemctl")
    cfg = {"salt_minion": {"conf": {"master": "m"}}, "mcollective": {"conf": {"loglevel": "warn"}}}
    ctx = ModuleContext(root=root, paths=Paths(root), cfg=cfg, instance_id="i-test", stage="final")
    order = ["puppet", "chef", "ansible", "mcollective", "salt_minion", "final_message"]
    results = {r.name: r for r in run_stage_modules(ctx, order)}
    assert list(results) == order
    assert results["salt_minion"].status == "failed" and "installing salt-minion" in results["salt_minion"].reason
    assert results["mcollective"].status == "ok", results["mcollective"].reason
    assert root.read_text("/etc/mcollective/server.cfg") == "loglevel = warn\n"
    assert {results[n].status for n in ("puppet", "chef", "ansible")} == {"skipped"}
    assert results["final_message"].status == "ok", results["final_message"].reason
    assert not root.exists("/etc/salt/minion")
