"""rh_subscription: the ``subscription-manager`` calls, in order, and no secret in the log or status.

subscription-manager is Red Hat's (not in Debian's archive) and needs Red Hat's servers: a
recording script stands in for it in a temporary Rocky Linux root with a chrooted busybox shell.
It answers ``identity`` as unregistered (exit 1), lists a consumed pool and one enabled repo.
"""

from __future__ import annotations

import logging

from module_support import run

PASSWORD = "hunter2-very-secret"
ACTIVATION_KEY = "ak-very-secret-key"
STAND_IN = """\
#!/bin/sh
echo "subscription-manager $*" >> /var/log/calls.log
case "$1" in
  identity) exit ${IDENTITY_STATUS:-1} ;;
  list) echo "8a85f98c60c2c2b40160c32447481b48" ;;
  repos) if [ "$2" = "--list-enabled" ]; then printf 'Repo ID:   rhel-9-baseos\\nRepo Name: BaseOS\\n'; fi ;;
esac
exit 0
"""


def _tool(root, extra: str = "", identity: int = 1) -> None:
    root.makedirs("/var/log")
    text = STAND_IN.replace("${IDENTITY_STATUS:-1}", str(identity)).replace('case "$1" in', extra + 'case "$1" in')
    root.write("/usr/sbin/subscription-manager", text, mode=0o755)


def _calls(root) -> list[str]:
    return root.read_text("/var/log/calls.log").splitlines()


def test_username_password_auto_attach_pools_repos(shell_target, rhel_target, caplog):
    _tool(rhel_target)
    cfg = {"rh_subscription": {
        "username": "joe@example.com", "password": PASSWORD, "auto-attach": True, "service-level": "self-support",
        "add-pool": ["8a85f98c60c2c2b40160c32447481b48", "pool2"], "enable-repo": ["rhel-9-appstream", "rhel-9-baseos"],
        "disable-repo": ["rhel-9-baseos", "rhel-9-extras"], "rhsm-baseurl": "https://cdn.example.com",
        "server-hostname": "sm.example.com"}}
    with caplog.at_level(logging.DEBUG):
        result, _ = run(rhel_target, "rh_subscription", cfg)
    assert result.status == "ok", result.reason
    assert _calls(rhel_target) == [
        "subscription-manager identity",
        f"subscription-manager register --username=joe@example.com --password={PASSWORD} "
        "--baseurl=https://cdn.example.com --serverurl=sm.example.com",
        "subscription-manager attach --auto --servicelevel=self-support",
        "subscription-manager list --consumed --pool-only",
        "subscription-manager attach --pool=pool2",
        "subscription-manager repos --list-enabled",
        "subscription-manager repos --disable=rhel-9-baseos --enable=rhel-9-appstream",
    ]
    assert PASSWORD not in caplog.text


def test_activation_key_and_org(shell_target, rhel_target):
    _tool(rhel_target)
    result, _ = run(rhel_target, "rh_subscription", {"rh_subscription": {"activation-key": ACTIVATION_KEY,
                                                                          "org": 12345678}})
    assert result.status == "ok", result.reason
    assert _calls(rhel_target) == ["subscription-manager identity",
                                   f"subscription-manager register --activationkey={ACTIVATION_KEY} --org=12345678"]


def test_already_registered_is_not_registered_again(shell_target, rhel_target):
    _tool(rhel_target, identity=0)
    result, _ = run(rhel_target, "rh_subscription", {"rh_subscription": {"username": "u", "password": PASSWORD}})
    assert result.status == "ok", result.reason
    assert _calls(rhel_target) == ["subscription-manager identity"]


def test_failed_registration_masks_the_secret(shell_target, rhel_target, caplog):
    _tool(rhel_target, extra=f'[ "$1" = register ] && {{ echo "Invalid credentials for {PASSWORD}" >&2; exit 70; }}\n')
    with caplog.at_level(logging.DEBUG):
        result, _ = run(rhel_target, "rh_subscription", {"rh_subscription": {"username": "u", "password": PASSWORD}})
    assert result.status == "failed" and "rh_subscription: register failed: Invalid credentials" in result.reason
    assert PASSWORD not in result.reason and PASSWORD not in caplog.text


def test_incomplete_credentials(rhel_target):
    result, _ = run(rhel_target, "rh_subscription", {"rh_subscription": {"activation-key": ACTIVATION_KEY}})
    assert result.status == "failed" and "activation-key and org go together" in result.reason
    result, _ = run(rhel_target, "rh_subscription", {"rh_subscription": {"username": "u", "password": "p",
                                                                          "service-level": "premium"}})
    assert result.status == "failed" and "service-level needs auto-attach: true" in result.reason


def test_missing_tool(rhel_target):
    result, _ = run(rhel_target, "rh_subscription", {"rh_subscription": {"username": "u", "password": PASSWORD}})
    assert result.status == "failed" and "subscription-manager is not installed" in result.reason


def test_wrong_type_names_the_key_not_the_value(rhel_target):
    result, _ = run(rhel_target, "rh_subscription", {"rh_subscription": {"username": "u", "password": 123456789}})
    assert result.status == "failed" and "rh_subscription.password: expected string" in result.reason
    assert "123456789" not in result.reason


def test_not_on_debian(target):
    result, ctx = run(target, "rh_subscription", {"rh_subscription": {"username": "u", "password": PASSWORD}})
    assert result.status == "skipped" and "not applicable to debian" in ctx.warnings[0]
