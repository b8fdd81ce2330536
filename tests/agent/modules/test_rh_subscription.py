"""rh_subscription: the ``subscription-manager`` calls, in order, and no secret in the log or status.

subscription-manager is Red Hat's (not in Debian's archive) and needs Red Hat's servers: a
recording script stands in for it in a temporary Rocky Linux root with a chrooted busybox shell.
It answers ``identity`` as unregistered (exit 1), lists a consumed pool and one enabled repo.
"""

from __future__ import annotations

import json
import logging

import pytest

from tests.agent.modules.module_support import run

PASSWORD = "hunter2-very-secret"
ACTIVATION_KEY = "ak-very-secret-key"
STAND_IN = """\
#!/bin/sh
echo "subscription-manager $*" >> /var/log/calls.log
case "$1" in
  identity) exit ${IDENTITY_STATUS:-1} ;;
  list) echo "8a85f98c60c2c2b40160c32447481b48"; [ "$2" = --available ] && echo pool2 ;;
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
        "subscription-manager list --available --pool-only",
        "subscription-manager list --consumed --pool-only",
        "subscription-manager attach --pool=pool2",
        "subscription-manager repos --list-enabled",
        "subscription-manager repos --disable=rhel-9-baseos --enable=rhel-9-appstream",
    ]
    assert PASSWORD not in caplog.text


def test_unavailable_pool_is_named_after_the_rest_is_done(shell_target, rhel_target):
    _tool(rhel_target)
    result, _ = run(rhel_target, "rh_subscription", {"rh_subscription": {
        "username": "u", "password": PASSWORD, "add-pool": ["pool2", "pool-gone"], "enable-repo": ["extra"]}})
    assert result.status == "failed" and result.reason == \
        "rh_subscription.add-pool: not available to this system: pool-gone"
    calls = _calls(rhel_target)
    assert "subscription-manager attach --pool=pool2" in calls
    assert calls[-1] == "subscription-manager repos --enable=extra"


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


# ---------------------------------------------------------------- differential against cloud-init 22.4
REF_RHSM = r"""
import json, logging, sys
from cloudinit import subp
from cloudinit.config import cc_rh_subscription
ran = []
def fake_subp(cmd, *args, **kwargs):
    ran.append(" ".join(cmd))
    verb = cmd[1:3]
    if verb[0] == "identity":
        raise subp.ProcessExecutionError(exit_code=1, stderr="This system is not yet registered.")
    if verb[0] == "register":
        return ("The system has been registered with ID: 1234-abcd\n", "")
    if verb[0] == "list":
        return ("8a85f98c60c2c2b40160c32447481b48\n" + ("pool2\n" if "--available" in cmd else ""), "")
    if verb == ["repos", "--list-enabled"]:
        return ("Repo ID:   rhel-9-baseos\nRepo Name: BaseOS\n", "")
    if verb == ["repos", "--list-disabled"]:
        return ("Repo ID:   rhel-9-appstream\n", "")
    return ("", "")
subp.subp = fake_subp
cc_rh_subscription.handle("rh_subscription", json.loads(sys.argv[1]), None, logging.getLogger(), [])
print(json.dumps(ran))
"""
QUERIES = ("identity", "list ", "repos --list-")
DIFFERENTIAL = {
    "password, service level, pools, repos": {"rh_subscription": {
        "username": "joe@example.com", "password": PASSWORD, "auto-attach": True, "service-level": "self-support",
        "add-pool": ["pool2"], "enable-repo": ["rhel-9-appstream"], "disable-repo": ["rhel-9-baseos"],
        "rhsm-baseurl": "https://cdn.example.com", "server-hostname": "sm.example.com"}},
    "activation key, auto-attach": {"rh_subscription": {"activation-key": ACTIVATION_KEY, "org": 42,
                                                        "auto-attach": True}},
}


@pytest.mark.reference
@pytest.mark.parametrize("case", sorted(DIFFERENTIAL))
def test_same_changes_as_cloud_init(shell_target, rhel_target, case):
    """The commands that change the system are cloud-init 22.4's (its queries differ a little: it also
    lists the disabled repositories)."""
    from tests.reference import reference_python

    cfg = DIFFERENTIAL[case]
    theirs = json.loads(reference_python(REF_RHSM, json.dumps(cfg)).stdout)
    _tool(rhel_target)
    result, _ = run(rhel_target, "rh_subscription", cfg)
    assert result.status == "ok", result.reason
    ours = _calls(rhel_target)

    def changes(calls):
        return [c for c in calls if not c.split(" ", 1)[1].startswith(QUERIES)]

    assert changes(ours) == changes(theirs)


# ---------------------------------------------------------------- cloud-init 25.3: underscored keys, release_version
REF_RHSM_NEW = REF_RHSM.replace(
    'cc_rh_subscription.handle("rh_subscription", json.loads(sys.argv[1]), None, logging.getLogger(), [])',
    'from cloudinit import util\n'
    'util.del_dir = lambda path: ran.append("rm -r " + path)  # never the host\'s caches\n'
    'cc_rh_subscription.handle("rh_subscription", json.loads(sys.argv[1]), None, [])')
DIFFERENTIAL_NEW = {
    "underscored keys, release": {"rh_subscription": {
        "activation_key": ACTIVATION_KEY, "org": "42", "auto_attach": True, "service_level": "self-support",
        "add_pool": ["pool2"], "enable_repo": ["rhel-9-appstream"], "disable_repo": ["rhel-9-baseos"],
        "rhsm_baseurl": "https://cdn.example.com", "server_hostname": "sm.example.com",
        "release_version": "9.4"}},
    "hyphenated keys (deprecated)": DIFFERENTIAL["password, service level, pools, repos"],
}


@pytest.mark.reference
@pytest.mark.parametrize("case", sorted(DIFFERENTIAL_NEW))
def test_same_changes_as_cloud_init_26(shell_target, rhel_target, case):
    from tests.reference import NEW

    cfg = DIFFERENTIAL_NEW[case]
    theirs = json.loads(NEW.python(REF_RHSM_NEW, json.dumps(cfg)).stdout)
    _tool(rhel_target)
    rhel_target.makedirs("/var/cache/dnf/x")
    result, _ = run(rhel_target, "rh_subscription", cfg)
    assert result.status == "ok", result.reason

    def changes(calls):
        return [c for c in calls if not c.split(" ", 1)[1].startswith(QUERIES) and not c.startswith("rm -r")]

    assert changes(_calls(rhel_target)) == changes(theirs)
    assert ("release_version" in cfg["rh_subscription"]) == (not rhel_target.exists("/var/cache/dnf"))


def test_the_same_key_spelt_both_ways_is_an_error(rhel_target):
    _tool(rhel_target)
    result, _ = run(rhel_target, "rh_subscription", {"rh_subscription": {
        "activation_key": ACTIVATION_KEY, "activation-key": ACTIVATION_KEY, "org": "1"}})
    assert result.status == "failed"
    assert "activation_key and activation-key are the same setting" in result.reason
    assert ACTIVATION_KEY not in result.reason
