"""chef: client.rb, the validation key, the first-boot JSON, the omnibus install over HTTP, the run.

Chef Infra Client is not in Debian 12's archive (``apt-cache policy chef`` has no candidate) and
its omnibus installer downloads from chef.io, which this machine cannot reach: the omnibus script
here is one of our own, served by a real HTTP server on loopback, that installs a recording
``chef-client``. client.rb is checked line by line as Ruby settings (``name value``), the other
files by content, mode and owner, and the commands exactly, in a chrooted root.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time

import pytest

from tests.agent.modules.cm_support import add_applets, apt_recorder, calls, closed_port, recorder, serve
from tests.agent.modules.module_support import run

VALIDATION = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpVALIDATIONSECRET\n-----END RSA PRIVATE KEY-----\n"
OMNIBUS = (b'#!/bin/sh\necho "omnibus $*" >> /tmp/calls\n'
           b'printf \'#!/bin/sh\\necho "chef-client $*" >> /tmp/calls\\n\' > /usr/bin/chef-client\n'
           b'chmod 755 /usr/bin/chef-client\n')
BASE = {"server_url": "https://chef.example.com/organizations/acme", "validation_name": "acme-validator"}


def client_rb(text: str) -> dict[str, str]:
    """client.rb as {setting: Ruby value}: every line must be ``setting value`` (or the show_time line)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.split(None, 1)
        if name == "Chef::Log::Formatter.show_time":
            out[name] = value
            continue
        assert value.startswith(('"', ":")), line  # a Ruby string or symbol, nothing else
        out[name] = value
    return out


def _mode(root, path: str) -> int:
    return stat.S_IMODE(root.stat(path).st_mode)


def test_files_written_and_omnibus_install_and_run(shell_target, caplog):
    root = shell_target
    add_applets(root, "chmod")
    caplog.set_level(logging.DEBUG)
    with serve({"/install.sh": OMNIBUS}) as (base, asked):
        result, _ = run(root, "chef", {"chef": dict(
            BASE, install_type="omnibus", omnibus_url=f"{base}/install.sh", omnibus_version="18.3.0",
            validation_cert=VALIDATION, run_list=["recipe[apache2]", "role[db]"],
            initial_attributes={"apache": {"keepalive": False}}, environment="production",
            encrypted_data_bag_secret="/etc/chef/encrypted_data_bag_secret", chef_license="accept",
            http_proxy="http://proxy.example.com:3128", exec=True, delete_validation_post_exec=True)},
            stage="final")
    assert result.status == "ok", result.reason
    assert asked == ["/install.sh"]
    settings = client_rb(root.read_text("/etc/chef/client.rb"))
    assert settings == {
        "chef_license": '"accept"', "log_level": ":info", "ssl_verify_mode": ":verify_none",
        "log_location": '"/var/log/chef/client.log"', "validation_client_name": '"acme-validator"',
        "validation_key": '"/etc/chef/validation.pem"', "client_key": '"/etc/chef/client.pem"',
        "chef_server_url": '"https://chef.example.com/organizations/acme"', "environment": '"production"',
        "node_name": '"i-test"', "json_attribs": '"/etc/chef/firstboot.json"',
        "file_cache_path": '"/var/cache/chef"', "file_backup_path": '"/var/backups/chef"',
        "pid_file": '"/var/run/chef/client.pid"', "http_proxy": '"http://proxy.example.com:3128"',
        "encrypted_data_bag_secret": '"/etc/chef/encrypted_data_bag_secret"',
        "Chef::Log::Formatter.show_time": "= true"}
    assert json.loads(root.read_text("/etc/chef/firstboot.json")) == {
        "run_list": ["recipe[apache2]", "role[db]"], "apache": {"keepalive": False}}
    assert _mode(root, "/etc/chef/firstboot.json") == 0o600
    for directory in ("/etc/chef", "/var/log/chef", "/var/lib/chef", "/var/cache/chef", "/var/backups/chef",
                      "/var/run/chef"):
        assert root.isdir(directory), directory
    assert calls(root) == ["omnibus -v 18.3.0", "chef-client -d -i 1800 -s 20"]
    assert not root.exists("/etc/chef/validation.pem")  # delete_validation_post_exec
    assert "VALIDATIONSECRET" not in caplog.text and "VALIDATIONSECRET" not in result.reason


def test_validation_key_is_private_and_installed_chef_is_not_reinstalled(shell_target):
    root = shell_target
    recorder(root, "chef-client")
    result, _ = run(root, "chef", {"chef": dict(BASE, validation_cert=VALIDATION, validation_key="/etc/chef/v.pem",
                                                node_name="web-01", show_time=False,
                                                exec_arguments=["--once", "--no-fork"], exec=True)},
                    stage="final")
    assert result.status == "ok", result.reason
    assert root.read_text("/etc/chef/v.pem") == VALIDATION
    assert _mode(root, "/etc/chef/v.pem") == 0o600 and root.stat("/etc/chef/v.pem").st_uid == 0
    settings = client_rb(root.read_text("/etc/chef/client.rb"))
    assert settings["validation_key"] == '"/etc/chef/v.pem"' and settings["node_name"] == '"web-01"'
    assert "Chef::Log::Formatter.show_time" not in settings
    assert calls(root) == ["chef-client --once --no-fork"]


def test_without_a_validation_key_client_rb_names_none_and_nothing_runs(shell_target):
    root = shell_target
    recorder(root, "chef-client")
    result, _ = run(root, "chef", {"chef": dict(BASE, validation_cert="system")}, stage="final")
    assert result.status == "ok", result.reason
    # 'system': the key in the image is used, so client.rb names it; it is missing here: a warning
    assert "validation_key" in client_rb(root.read_text("/etc/chef/client.rb"))
    assert calls(root) == []  # chef-client installed, exec not asked
    result, ctx = run(root, "chef", {"chef": dict(BASE)}, stage="final")
    assert "validation_key" not in client_rb(root.read_text("/etc/chef/client.rb"))


def test_packages_install_type_on_debian_names_the_way_out(shell_target):
    root = shell_target
    apt_recorder(root, failing="chef")
    result, _ = run(root, "chef", {"chef": dict(BASE, validation_cert=VALIDATION)}, stage="final")
    assert result.status == "failed"
    assert "installing chef" in result.reason and "E: Unable to locate package chef" in result.reason
    assert "chef is not in Debian's archive: use chef.install_type omnibus" in result.reason


def test_unreachable_omnibus_url_fails_in_bounded_time(shell_target):
    root = shell_target
    started = time.monotonic()
    result, _ = run(root, "chef", {"chef": dict(BASE, install_type="omnibus", omnibus_url_retries=1,
                                                omnibus_url=f"http://127.0.0.1:{closed_port()}/install.sh")},
                    stage="final")
    assert time.monotonic() - started < 30
    assert result.status == "failed" and result.reason.startswith("chef.omnibus_url: cannot fetch the installer")


def test_an_oversized_installer_is_refused(shell_target):
    root = shell_target
    with serve({"/install.sh": b"#!/bin/sh\n" + b"#" * (5 * 1024 * 1024)}) as (base, _):
        result, _ = run(root, "chef", {"chef": dict(BASE, install_type="omnibus", omnibus_url=f"{base}/install.sh")},
                        stage="final")
    assert result.status == "failed" and "larger than the limit" in result.reason


def test_a_failing_installer_and_a_failing_run_are_named(shell_target):
    root = shell_target
    with serve({"/install.sh": b'#!/bin/sh\necho "no supported platform" >&2\nexit 1\n'}) as (base, _):
        result, _ = run(root, "chef", {"chef": dict(BASE, install_type="omnibus", omnibus_url=f"{base}/install.sh")},
                        stage="final")
    assert result.status == "failed"
    assert result.reason == ("chef.install_type omnibus: the installer chef-omnibus-install failed: "
                             "no supported platform")
    recorder(root, "chef-client", status=3)
    result, _ = run(root, "chef", {"chef": dict(BASE, exec=True)}, stage="final")
    assert result.status == "failed" and result.reason == "chef.exec: chef-client exited 3"


def test_bad_input_is_named_and_nothing_is_written(shell_target):
    root = shell_target
    for cfg, message in (
        ({"validation_name": "v"}, "chef.server_url: required"),
        (dict(BASE, run_list="recipe[x]"), "chef.run_list: expected array"),
        (dict(BASE, exec="yes"), "chef.exec: expected boolean"),
        (dict(BASE, install_type="rpm"), "chef.install_type"),
        (dict(BASE, log_level="info"), "chef.log_level: expected a Ruby symbol"),
        (dict(BASE, validation_key="validation.pem"), "chef.validation_key: expected an absolute path"),
        (dict(BASE, node_name='web"\nsystem("x")'), "chef.node_name: must be one line"),
    ):
        result, _ = run(root, "chef", {"chef": cfg}, stage="final")
        assert result.status == "failed" and message in result.reason, (cfg, result.reason)
    assert not root.exists("/etc/chef")


def test_quotes_in_values_stay_inside_the_ruby_string(shell_target):
    root = shell_target
    recorder(root, "chef-client")
    result, _ = run(root, "chef", {"chef": dict(BASE, node_name='web "01"')}, stage="final")
    assert result.status == "ok", result.reason
    assert client_rb(root.read_text("/etc/chef/client.rb"))["node_name"] == '"web \\"01\\""'


def test_runs_at_every_boot_like_cloud_init():
    from cloudseed.agent.modules.chef import MODULE
    from cloudseed.agent.state import PER_BOOT

    assert MODULE.frequency == PER_BOOT and MODULE.stage == "final"


CHEF_DOCUMENTS = [
    dict(BASE, validation_cert=VALIDATION),
    dict(BASE, node_name="web-01", environment="production", chef_license="accept-silent",
         encrypted_data_bag_secret="/etc/chef/secret", run_list=["recipe[apache2]", "role[db]"],
         initial_attributes={"apache": {"prefork": {"maxclients": 100}, "keepalive": False}}),
    dict(BASE, validation_cert="system", validation_key="/etc/chef/validator.pem", log_level=":debug",
         ssl_verify_mode=":verify_peer", log_location="/var/log/chef-client.log", file_cache_path="/var/chef/cache",
         pid_file="/run/chef-client.pid", client_key="/etc/chef/node.pem", show_time=False),
    dict(BASE, firstboot_path="/etc/chef/first.json", json_attribs="/etc/chef/first.json",
         directories=["/etc/chef", "/var/log/chef"], run_list=["recipe[base]"]),
    dict(BASE, validation_cert=VALIDATION, node_name="db-01", environment="staging", file_backup_path="/srv/bak",
         initial_attributes={"mysql": {"server_root_password": "x", "port": 3306}}),
    dict(BASE, log_level=":warn", chef_license="accept", run_list=[]),
]


@pytest.mark.reference
@pytest.mark.parametrize("document", CHEF_DOCUMENTS, ids=range(len(CHEF_DOCUMENTS)))
def test_same_files_as_cloud_init(shell_target, tmp_path, document):
    """client.rb (setting by setting), the validation key, the first-boot JSON and the package are
    those of cloud-init 22.4's module (its own client.rb template); deliberate differences: the
    header comment, and the validation key and first-boot JSON are 0600 (cloud-init: 0644)."""
    from tests.agent.modules.cm_support import reference_run

    top, ref_commands = reference_run(tmp_path, "chef", {"chef": document})
    root = shell_target
    add_applets(root, "chmod")
    recorder(root, "apt-get", 'case " $* " in *" install chef "*) printf "#!/bin/sh\\n" > /usr/bin/chef-client; '
                              'chmod 755 /usr/bin/chef-client;; esac')
    result, _ = run(root, "chef", {"chef": document}, stage="final")
    assert result.status == "ok", result.reason
    with open(os.path.join(top, "etc/chef/client.rb")) as handle:
        assert client_rb(root.read_text("/etc/chef/client.rb")) == client_rb(handle.read())
    first = document.get("firstboot_path", "/etc/chef/firstboot.json")
    with open(os.path.join(top, first.lstrip("/"))) as handle:
        assert json.loads(root.read_text(first)) == json.load(handle)
    key = document.get("validation_key", "/etc/chef/validation.pem")
    assert os.path.exists(os.path.join(top, key.lstrip("/"))) == root.exists(key)
    if root.exists(key):
        with open(os.path.join(top, key.lstrip("/"))) as handle:
            assert root.read_text(key) == handle.read()
    for directory in document.get("directories", []):
        assert root.isdir(directory) and os.path.isdir(os.path.join(top, directory.lstrip("/")))
    assert ref_commands == [["install", "chef"]]
    assert calls(root)[-1].endswith(" install chef")
