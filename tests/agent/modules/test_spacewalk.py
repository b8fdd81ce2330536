"""spacewalk: ``rhnreg_ks`` with the server, profile name, proxy, CA and activation key (RHEL family).

``rhnreg_ks`` and ``rhn-profile-sync`` (rhn-setup) are not in Debian's archive and need a
Spacewalk server: recording scripts stand in for them in a temporary Rocky Linux root with a
chrooted busybox shell; the exact command line is checked, and that the activation key never
reaches the log or the status. Differential: the commands equal those of Debian's cloud-init
22.4's own handler for the same document (its ``subp`` recorded).
"""

from __future__ import annotations

import logging

import pytest

from tests.agent.modules.module_support import InputDatasource, run

KEY = "1-s3cret-activation-key"
CFG = {"spacewalk": {"server": "spacewalk.example.com", "proxy": "proxy.example.com:3128", "activation_key": KEY}}
DS = InputDatasource(local_hostname="web1.example.com")


def _tools(root, register_body: str = "", sync_status: int = 1) -> None:
    root.makedirs("/var/log")
    root.write("/usr/sbin/rhnreg_ks", f'#!/bin/sh\necho "rhnreg_ks $*" >> /var/log/calls.log\n{register_body}',
               mode=0o755)
    root.write("/usr/sbin/rhn-profile-sync", f'#!/bin/sh\necho "rhn-profile-sync $*" >> /var/log/calls.log\n'
                                              f"exit {sync_status}\n", mode=0o755)


def test_registers_with_the_exact_command(shell_target, rhel_target, caplog):
    _tools(rhel_target)
    with caplog.at_level(logging.DEBUG):
        result, _ = run(rhel_target, "spacewalk", CFG, datasource=DS)
    assert result.status == "ok", result.reason
    assert rhel_target.read_text("/var/log/calls.log").splitlines() == [
        "rhn-profile-sync --verbose",
        "rhnreg_ks --serverUrl https://spacewalk.example.com/XMLRPC --profilename web1.example.com "
        f"--proxy proxy.example.com:3128 --sslCACert /usr/share/rhn/RHN-ORG-TRUSTED-SSL-CERT --activationkey {KEY}",
    ]
    assert KEY not in caplog.text


def test_already_registered_is_left_alone(shell_target, rhel_target):
    _tools(rhel_target, sync_status=0)
    result, _ = run(rhel_target, "spacewalk", CFG, datasource=DS)
    assert result.status == "ok", result.reason
    assert rhel_target.read_text("/var/log/calls.log") == "rhn-profile-sync --verbose\n"


def test_failing_registration_masks_the_key(shell_target, rhel_target, caplog):
    _tools(rhel_target, register_body=f'echo "Invalid activation key {KEY}" >&2\nexit 1\n')
    with caplog.at_level(logging.DEBUG):
        result, _ = run(rhel_target, "spacewalk", CFG, datasource=DS)
    assert result.status == "failed" and "rhnreg_ks failed to register with spacewalk.example.com" in result.reason
    assert KEY not in result.reason and KEY not in caplog.text


def test_missing_tool_names_the_package(rhel_target):
    result, _ = run(rhel_target, "spacewalk", CFG, datasource=DS)  # no rhnreg_ks and no dnf in this root
    assert result.status == "failed" and "spacewalk: installing rhn-setup:" in result.reason


def test_no_server_does_nothing(shell_target, rhel_target):
    _tools(rhel_target)
    result, _ = run(rhel_target, "spacewalk", {"spacewalk": {"activation_key": KEY}}, datasource=DS)
    assert result.status == "ok" and not rhel_target.exists("/var/log/calls.log")


def test_wrong_type_names_the_key_not_the_value(rhel_target):
    result, _ = run(rhel_target, "spacewalk", {"spacewalk": {"server": "s", "activation_key": 12345}})
    assert result.status == "failed" and "spacewalk.activation_key: expected string" in result.reason
    assert "12345" not in result.reason


def test_not_on_debian(target):
    result, ctx = run(target, "spacewalk", CFG)
    assert result.status == "skipped" and "not applicable to debian" in ctx.warnings[0]


REF_SPACEWALK = r"""
import json, logging, sys
from types import SimpleNamespace
from cloudinit import subp
from cloudinit.config import cc_spacewalk
ran = []
def fake_subp(cmd, *args, **kwargs):
    ran.append(" ".join(cmd))
    if cmd[0] == "rhn-profile-sync":
        raise subp.ProcessExecutionError(exit_code=1)
    return ("", "")
subp.subp = fake_subp
ds = SimpleNamespace(get_hostname=lambda fqdn=False: SimpleNamespace(hostname="web1.example.com"))
cloud = SimpleNamespace(datasource=ds, distro=SimpleNamespace(install_packages=lambda pkgs: None))
cc_spacewalk.handle("spacewalk", json.loads(sys.argv[1]), cloud, logging.getLogger(), [])
print(json.dumps(ran))
"""


@pytest.mark.reference
def test_same_commands_as_cloud_init(shell_target, rhel_target):
    import json

    from tests.reference import reference_python

    theirs = json.loads(reference_python(REF_SPACEWALK, json.dumps(CFG)).stdout)
    _tools(rhel_target)
    result, _ = run(rhel_target, "spacewalk", CFG, datasource=DS)
    assert result.status == "ok", result.reason
    assert rhel_target.read_text("/var/log/calls.log").splitlines() == theirs
