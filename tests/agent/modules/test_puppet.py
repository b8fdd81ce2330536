"""puppet: install (packages or the AIO script over loopback HTTP), puppet.conf, CSR attributes, run, service.

puppet-agent is in Debian 12's archive: the puppet.conf the module writes is read back by the
real ``puppet config print`` of this machine. The module runs in a chrooted root whose puppet,
apt-get and systemctl are recording scripts (puppet must not contact a server or start here).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time

import pytest
import yaml

from cloudseed.agent.modules.puppet import merge_conf
from tests.agent.modules.cm_support import add_applets, apt_recorder, calls, closed_port, recorder, serve
from tests.agent.modules.module_support import run

CONFIG_PRINT = ('case "$1" in config) printf "config = /etc/puppet/puppet.conf\\nssldir = /var/lib/puppet/ssl\\n'
                'csr_attributes = /etc/puppet/csr_attributes.yaml\\n";; esac')
CA = "-----BEGIN CERTIFICATE-----\nMIIBCA\n-----END CERTIFICATE-----\n"


def _puppet(root, agent_status: int = 0) -> None:
    recorder(root, "puppet", CONFIG_PRINT + f'\ncase "$1" in agent) exit {agent_status};; esac')
    apt_recorder(root)
    recorder(root, "systemctl")


def _mode(root, path: str) -> int:
    return stat.S_IMODE(root.stat(path).st_mode)


def test_configuration_files_and_commands(shell_target):
    root = shell_target
    _puppet(root)
    root.write("/etc/puppet/puppet.conf", "[main]\n  ssldir = /var/lib/puppet/ssl\nlogdir = /var/log/puppet\n"
                                          "[agent]\nserver = old.example.org\n")
    result, ctx = run(root, "puppet", {"fqdn": "Web01.Example.ORG", "puppet": {
        "conf": {"agent": {"server": "puppetserver.example.org", "certname": "%i.%f", "runinterval": "30m",
                           "usecacheonfailure": False},
                 "main": {"environment": "production"}, "ca_cert": CA},
        "csr_attributes": {"custom_attributes": {"1.2.840.113549.1.9.7": "challenge-secret"},
                           "extension_requests": {"pp_role": "web"}}}}, stage="final")
    assert result.status == "ok", result.reason
    text = root.read_text("/etc/puppet/puppet.conf")
    assert text == ("[main]\nssldir = /var/lib/puppet/ssl\nlogdir = /var/log/puppet\nenvironment = production\n"
                    "[agent]\nserver = puppetserver.example.org\ncertname = i-test.web01.example.org\n"
                    "runinterval = 30m\nusecacheonfailure = false\n")
    assert root.read_text("/etc/puppet/puppet.conf.old").startswith("[main]\n  ssldir")
    assert root.read_text("/var/lib/puppet/ssl/certs/ca.pem") == CA
    assert _mode(root, "/var/lib/puppet/ssl") == 0o771
    assert yaml.safe_load(root.read_text("/etc/puppet/csr_attributes.yaml")) == {
        "custom_attributes": {"1.2.840.113549.1.9.7": "challenge-secret"}, "extension_requests": {"pp_role": "web"}}
    assert _mode(root, "/etc/puppet/csr_attributes.yaml") == 0o600
    # puppet is in the image and no version asked: nothing installed; paths asked once; service enabled
    assert calls(root) == ["puppet config print config ssldir csr_attributes",
                           "systemctl --quiet enable puppet.service"]
    assert "challenge-secret" not in result.reason


@pytest.mark.skipif(not shutil.which("puppet"), reason="puppet-agent (Debian package) not installed")
def test_real_puppet_reads_the_written_puppet_conf(shell_target, tmp_path):
    root = shell_target
    _puppet(root)
    result, _ = run(root, "puppet", {"puppet": {"conf": {"agent": {
        "server": "puppetserver.example.org", "certname": "%i", "usecacheonfailure": False}}}}, stage="final")
    assert result.status == "ok", result.reason
    work = tmp_path / "puppet"
    proc = subprocess.run(
        ["puppet", "config", "print", "server", "certname", "usecacheonfailure", "--section", "agent",
         "--config", root.path("/etc/puppet/puppet.conf"), "--confdir", str(work), "--vardir", str(work / "var"),
         "--logdir", str(work / "log"), "--rundir", str(work / "run"), "--codedir", str(work / "code")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    printed = dict(line.split(" = ", 1) for line in proc.stdout.splitlines())
    assert printed == {"server": "puppetserver.example.org", "certname": "i-test", "usecacheonfailure": "false"}


def test_exec_runs_the_agent_and_accepts_changes_applied(shell_target):
    root = shell_target
    _puppet(root, agent_status=2)  # --test: 2 means changes were applied
    root.makedirs("/run/systemd/system")
    result, _ = run(root, "puppet", {"puppet": {"exec": True, "conf_file": "/etc/puppet/puppet.conf",
                                                "ssl_dir": "/var/lib/puppet/ssl",
                                                "csr_attributes_path": "/etc/puppet/csr.yaml"}}, stage="final")
    assert result.status == "ok", result.reason
    assert calls(root) == ["systemctl enable puppet.service", "puppet agent --test", "systemctl start puppet"]


def test_a_failing_agent_run_is_named(shell_target):
    root = shell_target
    _puppet(root, agent_status=4)
    result, _ = run(root, "puppet", {"puppet": {"exec": True, "exec_args": ["--test", "--noop"],
                                                "start_service": False}}, stage="final")
    assert result.status == "failed" and result.reason == "puppet.exec: puppet agent --test --noop exited 4"


def test_failing_service_start_is_named(shell_target):
    root = shell_target
    _puppet(root)
    recorder(root, "systemctl", 'case "$1" in start) exit 1;; esac')
    root.makedirs("/run/systemd/system")
    result, _ = run(root, "puppet", {"puppet": {"install": False}}, stage="final")
    assert result.status == "failed" and "puppet.start_service: starting puppet failed" in result.reason


def test_packages_install_with_a_version(shell_target):
    root = shell_target
    apt_recorder(root)
    recorder(root, "systemctl")
    result, _ = run(root, "puppet", {"puppet": {"package_name": "puppet-agent", "version": "7.23.0-1",
                                                "start_service": False}}, stage="final")
    assert result.status == "ok", result.reason
    assert calls(root)[-1].endswith("--quiet install puppet-agent=7.23.0-1")


def test_install_false_without_puppet_names_what_to_install(target):
    result, _ = run(target, "puppet", {"puppet": {"install": False, "conf": {"agent": {"server": "x"}}}},
                    stage="final")
    assert result.status == "failed"
    assert result.reason.startswith("puppet.install is false but puppet is not installed") and "puppet" in result.reason
    assert not target.exists("/etc/puppet")


def test_aio_script_is_fetched_over_http_and_run(shell_target):
    root = shell_target
    apt_recorder(root)
    recorder(root, "systemctl")
    add_applets(root, "chmod")
    script = (b'#!/bin/sh\necho "installer $*" >> /tmp/calls\nmkdir -p /opt/puppetlabs/bin\n'
              b'printf \'#!/bin/sh\\necho "puppet $*" >> /tmp/calls\\n\' > /opt/puppetlabs/bin/puppet\n'
              b'chmod 755 /opt/puppetlabs/bin/puppet\n')
    with serve({"/install.sh": script}) as (base, asked):
        result, _ = run(root, "puppet", {"puppet": {
            "install_type": "aio", "aio_install_url": f"{base}/install.sh", "version": "8.4.0",
            "collection": "puppet8", "conf": {"agent": {"server": "ps"}}}}, stage="final")
    assert result.status == "ok", result.reason
    assert asked == ["/install.sh"]
    assert calls(root) == ["installer -v 8.4.0 -c puppet8 --cleanup",
                           "puppet config print config ssldir csr_attributes",
                           "systemctl --quiet enable puppet.service"]
    assert root.read_text("/etc/puppetlabs/puppet/puppet.conf") == "[agent]\nserver = ps\n"
    assert not [n for n in root.listdir("/var/tmp") if n.startswith("cloudseed-")]  # installer removed


def test_aio_unreachable_url_fails_in_bounded_time(shell_target):
    root = shell_target
    recorder(root, "systemctl")
    started = time.monotonic()
    result, _ = run(root, "puppet", {"puppet": {"install_type": "aio", "cleanup": False,
                                                "aio_install_url": f"http://127.0.0.1:{closed_port()}/install.sh",
                                                "conf": {"agent": {"server": "ps"}}}}, stage="final")
    assert time.monotonic() - started < 30
    assert result.status == "failed" and result.reason.startswith("puppet.aio_install_url: cannot fetch the installer")
    assert not root.exists("/etc/puppetlabs")


def test_merge_adds_new_sections_at_the_end():
    assert merge_conf("# comment\n[main]\na = 1\n", {"agent": {"server": "s"}, "main": {"a": "2"}}) == \
        "# comment\n[main]\na = 2\n\n[agent]\nserver = s\n"


def test_wrong_types_are_named_and_nothing_is_done(shell_target):
    root = shell_target
    _puppet(root)
    for cfg, message in (
        ({"exec": "yes"}, "puppet.exec: expected boolean"),
        ({"install_type": "gem"}, "puppet.install_type"),
        ({"conf": {"agent": ["server=x"]}}, "puppet.conf.agent: expected object"),
        ({"conf": {"agent": {"server": "a\nb"}}}, "puppet.conf.agent.server: a puppet.conf value must be one line"),
        ({"conf_file": "puppet.conf"}, "puppet.conf_file: expected an absolute path"),
    ):
        result, _ = run(root, "puppet", {"puppet": cfg}, stage="final")
        assert result.status == "failed" and message in result.reason, (cfg, result.reason)
    assert calls(root) == [] and not root.exists("/etc/puppet")


PUPPET_CONF = "[main]\nlogdir = /var/log/puppet\nssldir = /var/lib/puppet/ssl\n[agent]\nserver = old.example.org\n"
PUPPET_DOCUMENTS = [
    {"conf": {"agent": {"server": "puppetserver.example.org", "certname": "%i.%f"}}},
    {"conf": {"main": {"environment": "production", "logdir": "/var/log/pp"},
              "agent": {"runinterval": 1800, "usecacheonfailure": False}, "ca_cert": CA}},
    {"package_name": "puppet-agent", "version": "7.23.0-1",
     "csr_attributes": {"custom_attributes": {"1.2.840.113549.1.9.7": "challenge"},
                        "extension_requests": {"pp_uuid": "6f1c2a9e", "pp_image_name": "web-frontend"}}},
    {"conf": {"server": {"autosign": True}, "user": {"color": "false"}},
     "csr_attributes": {"extension_requests": {"pp_role": "web"}}},
    {"conf": {"agent": {"server": "ps.example.org", "certname": "NODE-%i", "environment": "dev"},
              "main": {"ssldir": "/var/lib/puppet/ssl"}}},
]


@pytest.mark.reference
@pytest.mark.parametrize("document", PUPPET_DOCUMENTS, ids=range(len(PUPPET_DOCUMENTS)))
def test_same_files_as_cloud_init(shell_target, tmp_path, document):
    """puppet.conf (section by section), csr_attributes.yaml, ca.pem and the package are those of
    cloud-init 22.4's module; deliberate differences: booleans are ``true``/``false`` (cloud-init
    writes ``True``, which puppet refuses) and csr_attributes.yaml is 0600 (cloud-init: 0644)."""
    import configparser

    from tests.agent.modules.cm_support import reference_run

    paths = {"config": "/etc/puppet/puppet.conf", "ssldir": "/var/lib/puppet/ssl",
             "csr_attributes": "/etc/puppet/csr_attributes.yaml"}
    top, ref_commands = reference_run(tmp_path, "puppet", {"puppet": dict(document, start_service=False)},
                                      files={"/etc/puppet/puppet.conf": PUPPET_CONF}, stdout=paths,
                                      fqdn="web01.example.org")
    root = shell_target
    apt_recorder(root)
    recorder(root, "puppet", CONFIG_PRINT)
    root.write("/etc/puppet/puppet.conf", PUPPET_CONF)
    result, _ = run(root, "puppet", {"fqdn": "web01.example.org", "puppet": dict(document, start_service=False)},
                    stage="final")
    assert result.status == "ok", result.reason

    def sections(text: str) -> dict:
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text)
        return {s: {k: {"True": "true", "False": "false"}.get(v, v) for k, v in parser[s].items()}
                for s in parser.sections()}

    with open(os.path.join(top, "etc/puppet/puppet.conf")) as handle:
        assert sections(root.read_text("/etc/puppet/puppet.conf")) == sections(handle.read())
    for inner in ("/etc/puppet/csr_attributes.yaml", "/var/lib/puppet/ssl/certs/ca.pem"):
        ref_path = os.path.join(top, inner.lstrip("/"))
        assert os.path.exists(ref_path) == root.exists(inner), inner
        if os.path.exists(ref_path):
            with open(ref_path) as handle:
                assert yaml.safe_load(root.read_text(inner)) == yaml.safe_load(handle)
    installs = [c for c in ref_commands if c[0] == "install"]
    wanted = document.get("package_name", "puppet") + (f"={document['version']}" if "version" in document else "")
    assert installs == [["install", wanted]]
    # ours installs only when puppet is missing or a version is asked (here puppet is in the image)
    assert [c.rsplit(" ", 1)[-1] for c in calls(root) if " install " in c] == \
        ([wanted] if "version" in document else [])
