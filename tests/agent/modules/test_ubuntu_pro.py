"""ubuntu_pro (and the deprecated ubuntu_advantage key): ``pro`` config, attach through a 0600
attach-config file that is removed afterwards, enable; the token never in argv, log or status.

The pro client is Ubuntu's (not in Debian's archive) and attaching needs Canonical's contract
server: a recording script stands in for ``pro`` in a temporary Ubuntu root with a chrooted
busybox shell. For ``attach`` it copies the attach-config file it is given and its ``ls -ln``
line, so the test sees what the real client would have read and the file's mode.
"""

from __future__ import annotations

import logging

from tests.agent.modules.module_support import run

UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
TOKEN = "C1NWcZTHLteJXGVMM6YhvHDpGrhyy7"
STAND_IN = """\
#!/bin/sh
echo "pro $*" >> /var/log/calls.log
if [ "$1" = attach ]; then
  cat "$3" > /var/log/attach-config.seen
  ls -ln "$3" > /var/log/attach-config.ls
fi
"""


def _pro(root, extra: str = "") -> None:
    root.write("/etc/os-release", UBUNTU)
    root.makedirs("/var/log")
    root.write("/usr/bin/pro", STAND_IN + extra, mode=0o755)


def _calls(root) -> list[str]:
    return root.read_text("/var/log/calls.log").splitlines()


def test_config_attach_and_enable(shell_target, caplog):
    _pro(shell_target)
    cfg = {"ubuntu_pro": {"token": TOKEN, "enable": ["esm-infra", "livepatch"], "enable_beta": ["realtime-kernel"],
                          "config": {"http_proxy": "http://proxy.example.com:3128", "https_proxy": None}}}
    with caplog.at_level(logging.DEBUG):
        result, _ = run(shell_target, "ubuntu_pro", cfg)
    assert result.status == "ok", result.reason
    calls = _calls(shell_target)
    assert calls[:2] == ["pro config set http_proxy=http://proxy.example.com:3128", "pro config unset https_proxy"]
    assert calls[2].startswith("pro attach --attach-config /var/lib/cloudseed/ubuntu-pro/attach-")
    assert calls[3:] == ["pro enable --assume-yes --beta realtime-kernel"]
    assert shell_target.read_text("/var/log/attach-config.seen") == \
        f'token: "{TOKEN}"\nenable_services: ["esm-infra", "livepatch"]\n'
    assert shell_target.read_text("/var/log/attach-config.ls").startswith("-rw-------")
    assert shell_target.listdir("/var/lib/cloudseed/ubuntu-pro") == []  # removed after attaching
    assert TOKEN not in "".join(calls) and TOKEN not in caplog.text


def test_deprecated_ubuntu_advantage_key_works(shell_target):
    _pro(shell_target)
    result, _ = run(shell_target, "ubuntu_pro", {"ubuntu_advantage": {"token": TOKEN}})
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/var/log/attach-config.seen") == f'token: "{TOKEN}"\n'  # contract defaults


def test_already_attached_enables_only(shell_target):
    _pro(shell_target, '[ "$1" = attach ] && { echo "This machine is already attached to Example" >&2; exit 2; }\n'
                       "exit 0\n")
    result, _ = run(shell_target, "ubuntu_pro", {"ubuntu_pro": {"token": TOKEN, "enable": ["fips"]}})
    assert result.status == "ok", result.reason
    assert _calls(shell_target)[1:] == ["pro enable --assume-yes fips"]


def test_failed_attach_masks_the_token_and_removes_the_file(shell_target, caplog):
    _pro(shell_target, f'[ "$1" = attach ] && {{ echo "Invalid token {TOKEN}" >&2; exit 1; }}\nexit 0\n')
    with caplog.at_level(logging.DEBUG):
        result, _ = run(shell_target, "ubuntu_pro", {"ubuntu_pro": {"token": TOKEN}})
    assert result.status == "failed" and "ubuntu_pro.token: pro attach failed: Invalid token [token]" in result.reason
    assert TOKEN not in caplog.text
    assert shell_target.listdir("/var/lib/cloudseed/ubuntu-pro") == []


def test_no_token_auto_attaches_or_not(shell_target):
    _pro(shell_target)
    result, _ = run(shell_target, "ubuntu_pro", {"ubuntu_pro": {"enable": ["esm-apps"]}})
    assert result.status == "ok", result.reason
    assert _calls(shell_target) == ["pro auto-attach", "pro enable --assume-yes esm-apps"]
    shell_target.remove("/var/log/calls.log")
    result, _ = run(shell_target, "ubuntu_pro", {"ubuntu_pro": {"features": {"disable_auto_attach": True}}})
    assert result.status == "ok" and not shell_target.exists("/var/log/calls.log")


def test_not_a_pro_image_without_token(shell_target):
    _pro(shell_target, '[ "$1" = auto-attach ] && exit 1\nexit 0\n')
    result, _ = run(shell_target, "ubuntu_pro", {"ubuntu_pro": {"enable": ["esm-apps"]}})
    assert result.status == "failed" and "ubuntu_pro.token: not given" in result.reason


def test_missing_client_names_the_package(target):
    target.write("/etc/os-release", UBUNTU)  # no pro, no ua, no apt-get
    result, _ = run(target, "ubuntu_pro", {"ubuntu_pro": {"token": TOKEN}})
    assert result.status == "failed" and "installing ubuntu-advantage-tools:" in result.reason
    assert TOKEN not in result.reason


def test_wrong_type_names_the_key_not_the_value(target):
    target.write("/etc/os-release", UBUNTU)
    result, _ = run(target, "ubuntu_pro", {"ubuntu_pro": {"token": 1234567890123}})
    assert result.status == "failed" and "ubuntu_pro.token: expected string" in result.reason
    assert "1234567890123" not in result.reason


def test_schema_calls_ubuntu_advantage_deprecated():
    from cloudseed.agent.config.schema import validate_config

    problems = validate_config({"ubuntu_advantage": {"token": "x"}})
    assert [(p.path, p.level) for p in problems] == [("ubuntu_advantage", "deprecated")]


def test_only_on_ubuntu(target):
    result, ctx = run(target, "ubuntu_pro", {"ubuntu_pro": {"token": TOKEN}})
    assert result.status == "skipped" and "not applicable to debian" in ctx.warnings[0]
    assert TOKEN not in ctx.warnings[0]
