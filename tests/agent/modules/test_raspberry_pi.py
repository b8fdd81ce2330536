"""raspberry_pi: ``raspi-config nonint`` per interface, serial console and UART, USB gadget mode;
not applicable outside Raspberry Pi OS.

raspi-config and rpi-usb-gadget come from Raspberry Pi OS's own archive (not Debian's), and
they change a Pi's boot firmware config: recording scripts stand in for them in a temporary
root with a chrooted busybox shell; ``is_pifive`` answers as the board in the test would.
"""

from __future__ import annotations

from tests.agent.modules.module_support import run

PI_OS_64 = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
RASPBIAN = 'PRETTY_NAME="Raspbian GNU/Linux 12 (bookworm)"\nID=raspbian\nID_LIKE=debian\nVERSION_ID="12"\n'


def _pi(root, os_release: str = PI_OS_64, model: str = "Raspberry Pi 4 Model B Rev 1.5", pi5: bool = False,
        extra: str = "") -> None:
    root.write("/etc/os-release", os_release)
    root.makedirs("/var/log")
    root.write("/proc/device-tree/model", model + "\x00")
    root.write("/usr/bin/raspi-config",
               '#!/bin/sh\necho "raspi-config $*" >> /var/log/calls.log\n'
               f'[ "$2" = is_pifive ] && exit {0 if pi5 else 1}\n{extra}exit 0\n', mode=0o755)
    root.write("/usr/bin/rpi-usb-gadget", '#!/bin/sh\necho "rpi-usb-gadget $*" >> /var/log/calls.log\n', mode=0o755)


def _calls(root) -> list[str]:
    return root.read_text("/var/log/calls.log").splitlines()


def test_interfaces_and_usb_gadget(shell_target):
    _pi(shell_target)
    cfg = {"rpi": {"interfaces": {"spi": True, "i2c": False, "onewire": True,
                                  "serial": {"console": False, "hardware": True}},
                   "enable_usb_gadget": True}}
    result, _ = run(shell_target, "raspberry_pi", cfg)
    assert result.status == "ok", result.reason
    assert _calls(shell_target) == [
        "raspi-config nonint do_spi 0", "raspi-config nonint do_i2c 1", "raspi-config nonint do_onewire 0",
        "raspi-config nonint do_serial_cons 1", "raspi-config nonint do_serial_hw 0", "rpi-usb-gadget on"]
    assert shell_target.exists("/var/run/reboot-required")


def test_serial_console_needs_the_uart_before_the_pi_5(shell_target):
    _pi(shell_target, os_release=RASPBIAN)
    result, _ = run(shell_target, "raspberry_pi", {"rpi": {"interfaces": {"serial": True}}})
    assert result.status == "ok", result.reason
    assert _calls(shell_target) == ["raspi-config nonint is_pifive", "raspi-config nonint do_serial_cons 0",
                                    "raspi-config nonint do_serial_hw 0"]


def test_serial_console_alone_on_a_pi_5(shell_target):
    _pi(shell_target, model="Raspberry Pi 5 Model B Rev 1.0", pi5=True)
    result, _ = run(shell_target, "raspberry_pi", {"rpi": {"interfaces": {"serial": {"console": True}}}})
    assert result.status == "ok", result.reason
    assert _calls(shell_target)[1:] == ["raspi-config nonint do_serial_cons 0", "raspi-config nonint do_serial_hw 1"]


def test_failing_command_names_the_key_and_the_rest_still_runs(shell_target):
    _pi(shell_target, extra='[ "$2" = do_i2c ] && { echo "i2c: no such overlay" >&2; exit 1; }\n')
    result, _ = run(shell_target, "raspberry_pi", {"rpi": {"interfaces": {"spi": True, "i2c": True},
                                                           "enable_usb_gadget": False}})
    assert result.status == "failed" and "rpi.interfaces.i2c: do_i2c 0 failed" in result.reason
    assert _calls(shell_target)[-1] == "rpi-usb-gadget off"


def test_missing_raspi_config(target):
    target.write("/proc/device-tree/model", "Raspberry Pi 4 Model B\x00")
    result, _ = run(target, "raspberry_pi", {"rpi": {"interfaces": {"spi": True}}})
    assert result.status == "failed" and "raspi-config is not installed" in result.reason


def test_not_applicable_on_plain_debian(target):
    result, ctx = run(target, "raspberry_pi", {"rpi": {"interfaces": {"spi": True}}})
    assert result.status == "ok"
    assert "rpi not applied: not applicable here: this is debian, not Raspberry Pi OS" in ctx.warnings[0]


def test_wrong_type(target):
    result, _ = run(target, "raspberry_pi", {"rpi": {"interfaces": {"spi": "on"}}})
    assert result.status == "failed" and "rpi.interfaces.spi: expected boolean" in result.reason


def test_not_on_rhel(rhel_target):
    result, ctx = run(rhel_target, "raspberry_pi", {"rpi": {"interfaces": {"spi": True}}})
    assert result.status == "skipped" and "not applicable to rocky" in ctx.warnings[0]
