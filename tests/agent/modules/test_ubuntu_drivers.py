"""ubuntu_drivers: NVIDIA's licence answered through debconf, then ``ubuntu-drivers install``.

``ubuntu-drivers`` is Ubuntu's (not in Debian's archive): a recording script stands in for it.
debconf is Debian's own, so the template is loaded by the real ``debconf-communicate`` in the
debootstrapped root (made to say it is Ubuntu) and read back from debconf's database.
"""

from __future__ import annotations

from tests.agent.modules.module_support import run

UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
ACCEPTED = {"drivers": {"nvidia": {"license-accepted": True, "version": "535"}}}


def _drivers_tool(root, body: str = "") -> None:
    root.makedirs("/var/log")
    root.write("/usr/bin/ubuntu-drivers", '#!/bin/sh\necho "ubuntu-drivers $*" >> /var/log/calls.log\n' + body,
               mode=0o755)


def test_licence_in_debconf_and_driver_installed(debian_root):
    debian_root.write("/etc/os-release", UBUNTU)
    _drivers_tool(debian_root)
    result, _ = run(debian_root, "ubuntu_drivers", ACCEPTED, stage="final")
    assert result.status == "ok", result.reason
    assert debian_root.read_text("/var/log/calls.log") == "ubuntu-drivers install --gpgpu nvidia:535\n"
    answer = debian_root.run(["debconf-communicate"], input="GET linux/nvidia/latelink\n").stdout.strip()
    assert answer == "0 true"
    assert not debian_root.exists("/var/lib/cloudseed/tmp-ubuntu-drivers")  # the template file is gone


def test_latest_version_when_none_given(shell_target):
    shell_target.write("/etc/os-release", UBUNTU)
    _drivers_tool(shell_target)
    # a stand-in for debconf-communicate that answers "0" like the real one after loading a template
    shell_target.write("/usr/bin/debconf-communicate", "#!/bin/sh\ncat > /var/log/debconf.in\necho 0\n", mode=0o755)
    result, _ = run(shell_target, "ubuntu_drivers", {"drivers": {"nvidia": {"license-accepted": True}}},
                    stage="final")
    assert result.status == "ok", result.reason
    assert shell_target.read_text("/var/log/calls.log") == "ubuntu-drivers install --gpgpu nvidia\n"
    assert shell_target.read_text("/var/log/debconf.in").startswith("X_LOADTEMPLATEFILE /var/lib/cloudseed/")


def test_licence_not_accepted_installs_nothing(shell_target):
    shell_target.write("/etc/os-release", UBUNTU)
    _drivers_tool(shell_target)
    result, _ = run(shell_target, "ubuntu_drivers", {"drivers": {"nvidia": {"license-accepted": False}}},
                    stage="final")
    assert result.status == "ok", result.reason
    assert not shell_target.exists("/var/log/calls.log")


def test_no_drivers_found_is_a_clear_failure(shell_target):
    shell_target.write("/etc/os-release", UBUNTU)
    _drivers_tool(shell_target, 'echo "No drivers found for installation."\nexit 1\n')
    shell_target.write("/usr/bin/debconf-communicate", "#!/bin/sh\ncat >/dev/null\necho 0\n", mode=0o755)
    result, _ = run(shell_target, "ubuntu_drivers", ACCEPTED, stage="final")
    assert result.status == "failed" and "found no NVIDIA driver" in result.reason


def test_missing_tool_names_the_package(target):
    target.write("/etc/os-release", UBUNTU)  # no ubuntu-drivers and no apt-get in this root
    result, _ = run(target, "ubuntu_drivers", ACCEPTED, stage="final")
    assert result.status == "failed" and "installing ubuntu-drivers-common:" in result.reason


def test_wrong_type(target):
    target.write("/etc/os-release", UBUNTU)
    result, _ = run(target, "ubuntu_drivers", {"drivers": {"nvidia": {"license-accepted": "yes"}}}, stage="final")
    assert result.status == "failed" and "drivers.nvidia.license-accepted: expected boolean" in result.reason


def test_only_on_ubuntu(target):
    result, ctx = run(target, "ubuntu_drivers", ACCEPTED, stage="final")
    assert result.status == "skipped" and "not applicable to debian" in ctx.warnings[0]
