"""wireguard: configuration files wg-quick really parses, secrets kept private, clear failures."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest
import yaml

from cloudseed.agent.modules.wireguard import MODULE
from tests.agent.modules.module_support import run

WG0 = ("[Interface]\nPrivateKey = 2Yo3uIKNyyYtKPhHvfDqH5dDj9FsQ1Nqs0Y0BbiS1Wc=\nAddress = 10.10.0.2/24\n\n"
       "[Peer]\nPublicKey = Fn/Ma5/ITMoqAXn5KsR/8hOhZ9S4QcKuLRGyCbBmEgI=\nEndpoint = 192.0.2.1:51820\n"
       "AllowedIPs = 10.10.0.0/24\n")


def _with_tools(root) -> None:
    """wg and wg-quick present in the root (they are only looked for before the configuration is written)."""
    root.makedirs("/usr/bin")
    for tool in ("wg", "wg-quick"):
        root.write(f"/usr/bin/{tool}", "#!/bin/sh\nexit 0\n", mode=0o755)


@pytest.mark.skipif(not shutil.which("wg-quick"), reason="wireguard-tools not installed")
def test_configuration_is_private_and_wg_quick_parses_it(target, tmp_path):
    _with_tools(target)
    result, _ = run(target, "wireguard", {"wireguard": {"interfaces": [
        {"name": "wg0", "config_path": "/etc/wireguard/wg0.conf", "content": WG0}]}})
    # no systemctl in this root: enabling the unit fails, named; the configuration is in place
    assert result.status == "failed" and "enabling wg-quick@wg0" in result.reason
    info = target.stat("/etc/wireguard/wg0.conf")
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == 0
    assert target.read_text("/etc/wireguard/wg0.conf") == WG0
    assert "2Yo3uIKNyyYtKPhHvfDqH5dDj9FsQ1Nqs0Y0BbiS1Wc" not in result.reason
    copy = tmp_path / "wg0.conf"
    shutil.copy(target.path("/etc/wireguard/wg0.conf"), copy)
    os.chmod(copy, 0o600)
    stripped = subprocess.run(["wg-quick", "strip", str(copy)], capture_output=True, text=True)
    assert stripped.returncode == 0, stripped.stderr
    assert "PrivateKey = 2Yo3uIKNyyYtKPhHvfDqH5dDj9FsQ1Nqs0Y0BbiS1Wc=" in stripped.stdout
    assert "Address" not in stripped.stdout   # wg-quick's own keys are understood and stripped


def test_enabled_in_an_offline_root_with_systemctl(shell_target):
    target = shell_target
    _with_tools(target)
    # an offline root's systemctl enables units without a running systemd; record what it was asked
    target.write("/usr/bin/systemctl", '#!/bin/sh\necho "$@" >> /tmp/systemctl-calls\n', mode=0o755)
    result, _ = run(target, "wireguard", {"wireguard": {"interfaces": [
        {"name": "wg0", "config_path": "/etc/wireguard/wg0.conf", "content": WG0},
        {"name": "wg1", "config_path": "/etc/wireguard/wg1.conf", "content": WG0}]}})
    assert result.status == "ok", result.reason
    assert target.read_text("/tmp/systemctl-calls") == "--quiet enable wg-quick@wg0\n--quiet enable wg-quick@wg1\n"


@pytest.mark.parametrize("entry,message", [
    ({"name": "wg0", "config_path": "/etc/wireguard/wg0.conf"}, "wireguard.interfaces[0].content: missing"),
    ({"name": "wg0; reboot", "config_path": "/x", "content": "x"}, "wireguard.interfaces[0].name: not a usable"),
    ({"name": "wg0", "config_path": "relative.conf", "content": "x"}, "config_path: expected an absolute path"),
])
def test_bad_entries_are_named_and_nothing_is_written(target, entry, message):
    _with_tools(target)
    result, _ = run(target, "wireguard", {"wireguard": {"interfaces": [entry]}})
    assert result.status == "failed" and message in result.reason
    assert not target.exists("/etc/wireguard")


def test_missing_tools_are_installed_through_the_package_manager_or_named(target):
    result, _ = run(target, "wireguard", {"wireguard": {"interfaces": [
        {"name": "wg0", "config_path": "/etc/wireguard/wg0.conf", "content": WG0}]}})
    assert result.status == "failed" and result.reason.startswith("wireguard: installing wireguard-tools")
    assert not target.exists("/etc/wireguard/wg0.conf")


def test_example_is_valid_wg_quick_syntax(tmp_path):
    content = yaml.safe_load(MODULE.examples[0])["wireguard"]["interfaces"][0]["content"]
    assert "PrivateKey = " in content and "AllowedIPs = " in content
