"""fan: the FAN config file, ubuntu-fan enabled and restarted (Ubuntu only).

ubuntu-fan is not in Debian's archive, so the tests run the module in a temporary Ubuntu root
with a chrooted busybox shell, where small recording scripts stand in for ``fanctl`` and
``systemctl`` (they log their argv); the file written and the exact commands are checked.
"""

from __future__ import annotations

from tests.agent.modules.module_support import run

UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
CONFIG = "# fan 240\n10.0.0.0/8 eth0/16 dhcp\n"


def _tool(root, path: str, body: str = "") -> None:
    """A recording stand-in: argv appended to /var/log/calls.log, then ``body``."""
    root.write(path, f'#!/bin/sh\necho "{path.rsplit("/", 1)[1]} $*" >> /var/log/calls.log\n{body}', mode=0o755)


def _calls(root) -> list[str]:
    return root.read_text("/var/log/calls.log", default="").splitlines()


def _ubuntu(root, systemd: bool = True) -> None:
    root.write("/etc/os-release", UBUNTU)
    root.makedirs("/var/log")
    _tool(root, "/usr/sbin/fanctl")
    _tool(root, "/usr/bin/systemctl")
    if systemd:
        root.makedirs("/run/systemd/system")


def test_config_written_service_enabled_and_restarted(shell_target):
    _ubuntu(shell_target)
    result, _ = run(shell_target, "fan", {"fan": {"config": CONFIG}}, stage="final")
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/etc/network/fan") == CONFIG
    assert _calls(shell_target) == ["systemctl enable ubuntu-fan", "systemctl restart ubuntu-fan"]


def test_config_path_and_missing_newline(shell_target):
    _ubuntu(shell_target, systemd=False)
    result, _ = run(shell_target, "fan", {"fan": {"config": "10.0.0.0/8 eth0/16 dhcp",
                                                  "config_path": "/etc/fan.conf"}}, stage="final")
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/etc/fan.conf") == "10.0.0.0/8 eth0/16 dhcp\n"
    assert _calls(shell_target) == ["systemctl --quiet enable ubuntu-fan"]  # offline root: no restart


def test_failed_restart_names_the_service(shell_target):
    _ubuntu(shell_target)
    _tool(shell_target, "/usr/bin/systemctl", 'case "$1" in restart) echo "Job failed" >&2; exit 1;; esac\n')
    result, _ = run(shell_target, "fan", {"fan": {"config": CONFIG}}, stage="final")
    assert result.status == "failed"
    assert "restarting ubuntu-fan failed: Job failed" in result.reason
    assert shell_target.read_text("/etc/network/fan") == CONFIG


def test_missing_fanctl_installs_ubuntu_fan_or_says_so(shell_target):
    shell_target.write("/etc/os-release", UBUNTU)  # no fanctl, no apt-get in this root
    result, _ = run(shell_target, "fan", {"fan": {"config": CONFIG}}, stage="final")
    assert result.status == "failed" and "fan: installing ubuntu-fan:" in result.reason
    assert not shell_target.exists("/etc/network/fan")


def test_wrong_type(target):
    target.write("/etc/os-release", UBUNTU)
    result, _ = run(target, "fan", {"fan": {"config": ["not", "text"]}}, stage="final")
    assert result.status == "failed" and "fan.config: expected string" in result.reason


def test_only_on_ubuntu(target):
    result, ctx = run(target, "fan", {"fan": {"config": CONFIG}}, stage="final")
    assert result.status == "skipped" and "not applicable to debian" in ctx.warnings[0]
