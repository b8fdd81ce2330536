"""mcollective: server.cfg settings merged into the existing file, certificates, package and service.

MCollective is in Debian 12's archive: where it is installed on this machine, the written
server.cfg is read back by MCollective's own configuration loader (``MCollective::Config``, the
code mcollectived runs). The module itself runs in a chrooted root whose apt-get and systemctl
are recording scripts (the service must not start here).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from cloudseed.agent.modules.mcollective import merge
from tests.agent.modules.cm_support import apt_recorder, calls, recorder
from tests.agent.modules.module_support import run

SERVER_CFG = """\
# the package's file
main_collective = mcollective
collectives = mcollective
libdir = /usr/share/mcollective/plugins
logfile = /var/log/mcollective.log
loglevel = info
daemonize = 1

# security
securityprovider = psk
plugin.psk = unset
connector = activemq
plugin.activemq.pool.size = 1
factsource = yaml
plugin.yaml = /etc/mcollective/facts.yaml
"""
PUBLIC = "-----BEGIN CERTIFICATE-----\nMIIBPUBLIC\n-----END CERTIFICATE-----\n"
PRIVATE = "-----BEGIN RSA PRIVATE KEY-----\nMIIESECRETSECRET\n-----END RSA PRIVATE KEY-----\n"
LOADER = ('require "mcollective"; c = MCollective::Config.instance; c.loadconfig(ARGV[0]); '
          'puts c.loglevel, c.securityprovider, c.pluginconf["stomp.host"], c.pluginconf["stomp.port"], '
          'c.pluginconf["ssl_server_private"], c.daemonize')


def _tools(root, systemctl_body: str = "") -> None:
    apt_recorder(root)
    recorder(root, "systemctl", systemctl_body)


def _settings(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def test_settings_are_merged_and_certificates_written(shell_target, caplog):
    root = shell_target
    _tools(root)
    root.write("/etc/mcollective/server.cfg", SERVER_CFG, mode=0o600)
    result, _ = run(root, "mcollective", {"mcollective": {"conf": {
        "loglevel": "debug", "plugin.stomp.host": "dbhost", "plugin.stomp.port": 61613, "daemonize": False,
        "public-cert": PUBLIC, "private-cert": PRIVATE}}}, stage="final")
    assert result.status == "ok", result.reason
    text = root.read_text("/etc/mcollective/server.cfg")
    settings = _settings(text)
    assert settings["loglevel"] == "debug" and settings["daemonize"] == "false"
    assert settings["plugin.stomp.host"] == "dbhost" and settings["plugin.stomp.port"] == "61613"
    assert settings["securityprovider"] == "ssl"
    assert settings["plugin.ssl_server_public"] == "/etc/mcollective/ssl/server-public.pem"
    assert settings["plugin.ssl_server_private"] == "/etc/mcollective/ssl/server-private.pem"
    assert settings["main_collective"] == "mcollective"  # untouched settings kept
    lines = text.splitlines()
    assert lines[0] == "# the package's file" and "# security" in lines  # comments kept
    assert lines.index("loglevel = debug") == SERVER_CFG.splitlines().index("loglevel = info")  # in place
    assert sum(line.startswith("securityprovider") for line in lines) == 1
    assert root.read_text("/etc/mcollective/server.cfg.old") == SERVER_CFG
    assert stat.S_IMODE(root.stat("/etc/mcollective/server.cfg").st_mode) == 0o600  # its mode kept
    assert stat.S_IMODE(root.stat("/etc/mcollective/server.cfg.old").st_mode) == 0o600
    assert root.read_text("/etc/mcollective/ssl/server-private.pem") == PRIVATE
    assert stat.S_IMODE(root.stat("/etc/mcollective/ssl/server-private.pem").st_mode) == 0o600
    assert stat.S_IMODE(root.stat("/etc/mcollective/ssl/server-public.pem").st_mode) == 0o644
    assert calls(root)[-2:] == [
        "apt-get --option=Dpkg::Options::=--force-confold --option=Dpkg::options::=--force-unsafe-io "
        "--assume-yes --quiet install mcollective",
        "systemctl --quiet enable mcollective"]
    assert "SECRETSECRET" not in caplog.text and "SECRETSECRET" not in result.reason


@pytest.mark.skipif(not shutil.which("ruby") or not os.path.isdir("/usr/lib/ruby/vendor_ruby/mcollective"),
                    reason="mcollective (Debian package) not installed")
def test_mcollective_reads_the_written_file(shell_target, tmp_path):
    root = shell_target
    _tools(root)
    root.write("/etc/mcollective/server.cfg", SERVER_CFG, mode=0o600)
    result, _ = run(root, "mcollective", {"mcollective": {"conf": {
        "loglevel": "debug", "plugin.stomp.host": "dbhost", "plugin.stomp.port": 61613, "daemonize": False,
        "private-cert": PRIVATE}}}, stage="final")
    assert result.status == "ok", result.reason
    proc = subprocess.run(["ruby", "-e", LOADER, root.path("/etc/mcollective/server.cfg")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # the boolean is understood as false: the spelling cloud-init writes ("False") is not
    assert proc.stdout.split("\n")[:6] == ["debug", "Ssl", "dbhost", "61613",
                                           "/etc/mcollective/ssl/server-private.pem", "false"]


def test_a_new_file_when_there_is_none_and_restart_where_systemd_runs(shell_target):
    root = shell_target
    _tools(root)
    root.makedirs("/run/systemd/system")
    result, _ = run(root, "mcollective", {"mcollective": {"conf": {"loglevel": "warn"}}}, stage="final")
    assert result.status == "ok", result.reason
    assert root.read_text("/etc/mcollective/server.cfg") == "loglevel = warn\n"
    assert stat.S_IMODE(root.stat("/etc/mcollective/server.cfg").st_mode) == 0o600
    assert not root.exists("/etc/mcollective/server.cfg.old")
    assert calls(root)[-2:] == ["systemctl enable mcollective", "systemctl restart mcollective"]


def test_a_failing_restart_is_named(shell_target):
    root = shell_target
    _tools(root, 'case "$1" in restart) echo "mcollective.service: start request repeated too quickly" >&2; '
                 'exit 1;; esac')
    root.makedirs("/run/systemd/system")
    result, _ = run(root, "mcollective", {"mcollective": {"conf": {"loglevel": "warn"}}}, stage="final")
    assert result.status == "failed"
    assert result.reason == ("mcollective: restarting mcollective failed: mcollective.service: start request "
                             "repeated too quickly (see journalctl -u mcollective)")


def test_duplicate_lines_are_collapsed_to_the_value_set():
    text = merge("a = 1\nb = 2\na = 3\n", {"a": "9", "c": "x"})
    assert text == "a = 9\nb = 2\nc = x\n"


def test_bad_input_is_named_and_nothing_is_done(shell_target):
    root = shell_target
    _tools(root)
    root.write("/etc/mcollective/server.cfg", SERVER_CFG, mode=0o600)
    for cfg, message in (
        ({"conf": {"plugin": {"stomp.host": "x"}}}, "mcollective.conf.plugin"),
        ({"conf": "loglevel = debug"}, "mcollective.conf: expected object"),
        ({"conf": {"public-cert": 12}}, "mcollective.conf.public-cert: expected string"),
        ({"conf": {"loglevel": "debug\nplugin.psk = x"}},
         "mcollective.conf.loglevel: a server.cfg value must be one line"),
    ):
        result, _ = run(root, "mcollective", {"mcollective": cfg}, stage="final")
        assert result.status == "failed" and message in result.reason, (cfg, result.reason)
    assert calls(root) == [] and root.read_text("/etc/mcollective/server.cfg") == SERVER_CFG


def test_package_manager_failure_leaves_the_configuration_alone(shell_target):
    root = shell_target
    apt_recorder(root, failing="mcollective")
    recorder(root, "systemctl")
    root.write("/etc/mcollective/server.cfg", SERVER_CFG, mode=0o600)
    result, _ = run(root, "mcollective", {"mcollective": {"conf": {"loglevel": "debug"}}}, stage="final")
    assert result.status == "failed" and "installing mcollective" in result.reason
    assert root.read_text("/etc/mcollective/server.cfg") == SERVER_CFG


MCOLLECTIVE_DOCUMENTS = [
    {"conf": {"loglevel": "debug", "plugin.stomp.host": "dbhost"}},
    {"conf": {"loglevel": "warn", "plugin.stomp.port": 61613, "public-cert": PUBLIC, "private-cert": PRIVATE}},
    {"conf": {"identity": "web-01.example.org", "registerinterval": 300, "plugin.psk": "s3cret"}},
    {"conf": {"daemonize": False, "direct_addressing": True}},
    {"conf": {"plugin.activemq.pool.1.host": "mq.example.org", "plugin.activemq.pool.1.port": 61614,
              "main_collective": "mcollective", "private-cert": PRIVATE}},
]


@pytest.mark.reference
@pytest.mark.parametrize("existing", [SERVER_CFG, None], ids=["package-file", "no-file"])
@pytest.mark.parametrize("document", MCOLLECTIVE_DOCUMENTS, ids=range(len(MCOLLECTIVE_DOCUMENTS)))
def test_same_settings_and_certificates_as_cloud_init(shell_target, tmp_path, document, existing):
    """The same server.cfg settings, certificates and package as cloud-init 22.4's module;
    deliberate differences: booleans are ``true``/``false`` (cloud-init writes ``True``, which
    MCollective does not read as a boolean), and the service is handled with systemctl."""
    from tests.agent.modules.cm_support import reference_run

    files = {"/etc/mcollective/server.cfg": existing} if existing is not None else {}
    top, ref_commands = reference_run(tmp_path, "mcollective", {"mcollective": document}, files=files)
    root = shell_target
    _tools(root)
    if existing is not None:
        root.write("/etc/mcollective/server.cfg", existing, mode=0o600)
    result, _ = run(root, "mcollective", {"mcollective": document}, stage="final")
    assert result.status == "ok", result.reason
    with open(os.path.join(top, "etc/mcollective/server.cfg")) as handle:
        theirs = {k: {"True": "true", "False": "false"}.get(v, v) for k, v in _settings(handle.read()).items()}
    assert _settings(root.read_text("/etc/mcollective/server.cfg")) == theirs
    for name in ("server-public.pem", "server-private.pem"):
        ref_path = os.path.join(top, "etc/mcollective/ssl", name)
        assert os.path.exists(ref_path) == root.exists(f"/etc/mcollective/ssl/{name}")
        if os.path.exists(ref_path):
            with open(ref_path) as handle:
                assert root.read_text(f"/etc/mcollective/ssl/{name}") == handle.read()
            assert stat.S_IMODE(os.stat(ref_path).st_mode) == _mode_of(root, f"/etc/mcollective/ssl/{name}")
    assert ref_commands == [["install", "mcollective"], ["service", "mcollective", "restart"]]


def _mode_of(root, path: str) -> int:
    return stat.S_IMODE(root.stat(path).st_mode)
