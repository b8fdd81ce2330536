"""rsyslog: snippets and remotes written into temporary roots, each checked by Debian's rsyslogd -N1.

``rsyslogd -N1 -f FILE`` (rsyslog 8.2302 from Debian's archive, on the host) parses a file as a
whole configuration and fails on anything it cannot parse. The reload command is only meaningful
on the running system: on these roots the module logs the command line instead, which is asserted.
"""

from __future__ import annotations

import logging
import shutil
import subprocess

import pytest

from tests.agent.modules.module_support import run

SNIPPET = "/etc/rsyslog.d/20-cloud-config.conf"


def rsyslogd_check(path: str) -> None:
    if not shutil.which("rsyslogd"):
        pytest.skip("rsyslogd is not installed (scripts/setup.sh: rsyslog)")
    proc = subprocess.run(["rsyslogd", "-N1", "-f", path], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_remotes_are_rendered_and_valid(target, caplog):
    caplog.set_level(logging.INFO)
    cfg = {"rsyslog": {"remotes": {"maas": "192.168.1.1", "juju": "10.0.4.1:5514", "tcp6": "*.err @@[fd00::1]:514",
                                   "named": "@@logs.example.com # central", "off": None}}}
    result, _ = run(target, "rsyslog", cfg, stage="init")
    assert result.status == "ok", result.reason
    assert target.read_text(SNIPPET) == ("# begin remotes\n*.* @192.168.1.1 # maas\n*.* @10.0.4.1:5514 # juju\n"
                                         "*.err @@[fd00::1]:514 # tcp6\n*.* @@logs.example.com # named\n"
                                         "# end remotes\n")
    rsyslogd_check(target.path(SNIPPET))
    assert "not running systemctl try-reload-or-restart rsyslog" in caplog.text


def test_configs_by_file_in_order(target):
    cfg = {"rsyslog": {"config_dir": "/etc/rsyslog.d", "config_filename": "99-late.conf", "configs": [
        "*.* @@192.0.2.1", {"content": "*.*   @@192.0.2.2:10514", "filename": "01-example.conf"},
        {"content": "local0.* /var/log/local0.log\n"},
        {"content": "user.* /var/log/user.log", "filename": "/etc/abs.conf"}],
        "remotes": {"r": "192.0.2.9"}}}
    result, _ = run(target, "rsyslog", cfg, stage="init")
    assert result.status == "ok", result.reason
    late = target.read_text("/etc/rsyslog.d/99-late.conf")
    assert late == ("*.* @@192.0.2.1\nlocal0.* /var/log/local0.log\n"
                    "# begin remotes\n*.* @192.0.2.9 # r\n# end remotes\n")
    assert target.read_text("/etc/rsyslog.d/01-example.conf") == "*.*   @@192.0.2.2:10514\n"
    assert target.read_text("/etc/abs.conf") == "user.* /var/log/user.log\n"
    for path in ("/etc/rsyslog.d/99-late.conf", "/etc/rsyslog.d/01-example.conf", "/etc/abs.conf"):
        rsyslogd_check(target.path(path))


def test_legacy_list_form_is_deprecated_but_works(target):
    cfg = {"rsyslog": ["*.* @@10.1.1.1"], "rsyslog_filename": "50-legacy.conf", "rsyslog_dir": "/etc/rsyslog.d"}
    result, ctx = run(target, "rsyslog", cfg, stage="init")
    assert result.status == "ok", result.reason
    assert target.read_text("/etc/rsyslog.d/50-legacy.conf") == "*.* @@10.1.1.1\n"
    assert any("deprecated" in w for w in ctx.warnings)


def test_legacy_keys_with_the_mapping_form_are_reported(target):
    result, ctx = run(target, "rsyslog", {"rsyslog": {"configs": ["*.* @h"]}, "rsyslog_dir": "/x"}, stage="init")
    assert result.status == "ok"
    assert any("rsyslog_dir: deprecated" in w for w in ctx.warnings)
    assert target.exists(SNIPPET) and not target.exists("/x")


def test_reload_command_on_the_live_root_form(target, caplog):
    caplog.set_level(logging.INFO)
    command = ["pkill", "-HUP", "rsyslogd"]
    run(target, "rsyslog", {"rsyslog": {"configs": ["*.* @h"], "service_reload_command": command}}, stage="init")
    assert "not running pkill -HUP rsyslogd" in caplog.text
    run(target, "rsyslog", {"rsyslog": {"configs": ["*.* @h"], "service_reload_command": "kill -HUP $(cat /run/x)"}},
        stage="init")
    assert "not running sh -c kill -HUP $(cat /run/x)" in caplog.text


def test_a_failing_reload_command_is_reported(target):
    """The reload step alone, on a root taken for the live system so the command really runs (``false``,
    harmless; nothing is written there): its failure names the key."""
    from cloudseed.agent.modules import ModuleError, rsyslog
    from cloudseed.core.root import TargetRoot

    class LiveLike(TargetRoot):
        is_live = True  # type: ignore[assignment]  # commands run unchrooted, as on the running system

    class Ctx:
        root = LiveLike(target.top)
        log = logging.getLogger("test")

    with pytest.raises(ModuleError) as raised:
        rsyslog.reload(Ctx(), ["false"])
    assert "rsyslog.service_reload_command" in str(raised.value) and "'false' exited 1" in str(raised.value)


@pytest.mark.parametrize("cfg,words", [
    ({"rsyslog": "*.* @h"}, "rsyslog: expected a mapping"),
    ({"rsyslog": {"configs": "*.* @h"}}, "rsyslog.configs: expected list"),
    ({"rsyslog": {"configs": [{"filename": "x.conf"}]}}, "rsyslog.configs[0].content"),
    ({"rsyslog": {"configs": ["ok"], "remotes": {"bad": "a b c"}}}, "rsyslog.remotes.bad"),
    ({"rsyslog": {"configs": ["ok"], "remotes": {"bad": "@host:port"}}}, "rsyslog.remotes.bad"),
    ({"rsyslog": {"configs": [7]}}, "rsyslog.configs[0]: expected a string"),
    ({"rsyslog": {"configs": ["ok"], "install_rsyslog": True}}, "rsyslog.install_rsyslog: rsyslogd is not installed"),
])
def test_bad_input_writes_nothing(target, cfg, words):
    result, _ = run(target, "rsyslog", cfg, stage="init")
    assert result.status == "failed" and words in result.reason, result.reason
    assert not target.exists("/etc/rsyslog.d")
