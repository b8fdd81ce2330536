"""landscape: client.conf (0600, merged over what is there and the defaults), then
``landscape-config --silent --config FILE`` unless already registered; no secret on argv or in the log.

landscape-client is Ubuntu's (not in Debian's archive) and registering needs a Landscape server:
a recording script stands in for ``landscape-config`` in a temporary Ubuntu root with a chrooted
busybox shell; ``--is-registered`` answers 5 (not registered) unless told otherwise.
"""

from __future__ import annotations

import logging

from tests.agent.modules.module_support import run

UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
KEY = "reg-key-very-secret"
CLIENT = {"computer_title": "web-01", "account_name": "example", "registration_key": KEY,
          "url": "https://landscape.example.com/message-system", "tags": "web,prod"}


def _tool(root, registered: bool = False, extra: str = "") -> None:
    root.write("/etc/os-release", UBUNTU)
    root.makedirs("/var/log")
    root.write("/usr/bin/landscape-config",
               '#!/bin/sh\necho "landscape-config $*" >> /var/log/calls.log\n'
               f'[ "$2" = --is-registered ] && exit {0 if registered else 5}\n{extra}exit 0\n', mode=0o755)


def test_config_written_and_registered(shell_target, caplog):
    _tool(shell_target)
    shell_target.write("/etc/landscape/client.conf", "[client]\nlog_level = debug\nscript_users = ALL\n")
    with caplog.at_level(logging.DEBUG):
        result, _ = run(shell_target, "landscape", {"landscape": {"client": CLIENT}}, stage="final")
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/var/log/calls.log").splitlines() == [
        "landscape-config --silent --is-registered",
        "landscape-config --silent --config /etc/landscape/client.conf",
    ]
    assert shell_target.read_text("/etc/landscape/client.conf") == (
        "[client]\n"
        "url = https://landscape.example.com/message-system\n"
        "ping_url = https://landscape.canonical.com/ping\n"
        "data_path = /var/lib/landscape/client\n"
        "log_level = debug\n"
        "script_users = ALL\n"
        "computer_title = web-01\n"
        "account_name = example\n"
        f"registration_key = {KEY}\n"
        "tags = web,prod\n")
    assert shell_target.stat("/etc/landscape/client.conf").st_mode & 0o777 == 0o600
    assert shell_target.read_text("/etc/default/landscape-client") == "RUN=1\n"
    assert KEY not in caplog.text


def test_already_registered_only_updates_the_file(shell_target):
    _tool(shell_target, registered=True)
    result, _ = run(shell_target, "landscape", {"landscape": {"client": CLIENT}}, stage="final")
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/var/log/calls.log") == "landscape-config --silent --is-registered\n"


def test_failed_registration_masks_the_key(shell_target, caplog):
    _tool(shell_target, extra=f'echo "Invalid registration key {KEY}" >&2\nexit 1\n')
    with caplog.at_level(logging.DEBUG):
        result, _ = run(shell_target, "landscape", {"landscape": {"client": CLIENT}}, stage="final")
    assert result.status == "failed" and "landscape-config failed to register" in result.reason
    assert KEY not in result.reason and KEY not in caplog.text


def test_missing_tool_names_the_package(target):
    target.write("/etc/os-release", UBUNTU)  # no landscape-config and no apt-get
    result, _ = run(target, "landscape", {"landscape": {"client": CLIENT}}, stage="final")
    assert result.status == "failed" and "installing landscape-client:" in result.reason
    assert not target.exists("/etc/landscape/client.conf")


def test_wrong_type_and_bad_tags(target):
    target.write("/etc/os-release", UBUNTU)
    result, _ = run(target, "landscape", {"landscape": {"client": "not a mapping"}}, stage="final")
    assert result.status == "failed" and "landscape.client: expected object" in result.reason
    result, _ = run(target, "landscape", {"landscape": {"client": {"tags": "a b"}}}, stage="final")
    assert result.status == "failed" and "landscape.client.tags" in result.reason


def test_only_on_ubuntu(target):
    result, ctx = run(target, "landscape", {"landscape": {"client": CLIENT}}, stage="final")
    assert result.status == "skipped" and "not applicable to debian" in ctx.warnings[0]
