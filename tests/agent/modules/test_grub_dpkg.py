"""grub_dpkg: real debconf answers in a Debian chroot; nothing at all where grub is not installed."""

from __future__ import annotations

from tests.agent.modules.module_support import run


def _debconf(root) -> str:
    return root.read_text("/var/cache/debconf/config.dat")


def test_without_grub_nothing_is_run_or_written(debian_root):
    before = _debconf(debian_root)
    result, _ = run(debian_root, "grub_dpkg", {})
    assert result.status == "ok", result.reason
    assert _debconf(debian_root) == before


def test_given_devices_become_the_debconf_answers(debian_root):
    debian_root.write("/usr/sbin/grub-install", "#!/bin/sh\nexit 0\n", mode=0o755)  # grub present
    result, _ = run(debian_root, "grub_dpkg", {"grub_dpkg": {
        "grub-pc/install_devices": "/dev/disk/by-id/virtio-root", "grub-efi/install_devices": "/dev/vda15"}})
    assert result.status == "ok", result.reason
    db = _debconf(debian_root)
    assert "Name: grub-pc/install_devices\nTemplate: grub-pc/install_devices\nValue: /dev/disk/by-id/virtio-root" in db
    assert "Name: grub-pc/install_devices_empty\nTemplate: grub-pc/install_devices_empty\nValue: false" in db
    assert "Name: grub-efi/install_devices\nTemplate: grub-efi/install_devices\nValue: /dev/vda15" in db


def test_offline_image_without_devices_says_install_to_none(debian_root):
    debian_root.write("/usr/sbin/grub-install", "#!/bin/sh\nexit 0\n", mode=0o755)
    result, _ = run(debian_root, "grub_dpkg", {"grub-dpkg": {}})
    assert result.status == "ok", result.reason
    assert "Name: grub-pc/install_devices_empty\nTemplate: grub-pc/install_devices_empty\nValue: true" in \
        _debconf(debian_root)


def test_disabled(target):
    target.makedirs("/usr/sbin")
    target.write("/usr/sbin/grub-install", "#!/bin/sh\nexit 1\n", mode=0o755)
    result, _ = run(target, "grub_dpkg", {"grub_dpkg": {"enabled": False}})
    assert result.status == "ok", result.reason


def test_line_break_in_a_device_is_refused(target):
    target.makedirs("/usr/sbin")
    target.write("/usr/sbin/grub-install", "#!/bin/sh\nexit 0\n", mode=0o755)
    result, _ = run(target, "grub_dpkg", {"grub_dpkg": {"grub-pc/install_devices": "/dev/vda\ngrub-pc x y z"}})
    assert result.status == "failed" and "line break" in result.reason
