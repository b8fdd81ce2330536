"""A lab boot that adds a host-served apt repository through ``apt.sources`` and installs from it.

The host builds and signs a small repository (tests/agent/packages/repo.py) and serves it on
loopback; qemu's guestfwd makes it 10.0.2.100:8080 inside the guest (the guest reaches nothing
else: ``restrict=on``). The user-data replaces the image's sources.list (the lab has no route to
Debian's mirrors), adds the source with its armoured key (apt_configure, config stage) and installs
a package by name and one pinned (package_update_upgrade_install, final stage); a runcmd asks dpkg
inside the guest and writes its answer to the serial console, read from the console log (not the
disk: the lab may prune the backing image of an older package version while another engineer's
boot assembles a new one).
"""

from __future__ import annotations

import pytest

from tests.e2e.guest import BOOT_TIMEOUT

GUEST_ADDRESS, GUEST_PORT = "10.0.2.100", 8080


def _user_data(key: str, body: str) -> bytes:
    indented = "\n".join("        " + line for line in key.strip().splitlines())
    return f"""#cloud-config
apt:
  preserve_sources_list: false
  sources_list: |
    # the lab guest reaches only the repository the host serves
  sources:
    cloudseed-lab:
      source: "deb [signed-by=$KEY_FILE] http://{GUEST_ADDRESS}:{GUEST_PORT} stable main"
      key: |
{indented}
{body}""".encode()


INSTALL = """package_update: true
packages:
  - hello-cs
  - [pinned-cs, "1.0"]
runcmd:
  - dpkg-query -W -f='PKGCHECK ${Package} ${Status} ${Version}\\n' hello-cs pinned-cs > /dev/console 2>&1
"""

# kernel-cs's postinst touches /var/run/reboot-required: the module reboots, the next boot goes on
REBOOT = """packages: [kernel-cs]
package_reboot_if_required: true
runcmd:
  - echo "PKGRUN $(cat /proc/sys/kernel/random/boot_id)" > /dev/console
"""


def _boot(lab, tmp_path, body: str, timeout: float):
    """Build and serve the repository, boot a NoCloud instance with ``body``; (result, requests, console)."""
    import shutil

    for tool in ("dpkg-deb", "apt-ftparchive", "gpg"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (scripts/setup.sh)")
    from cloudseed.lab.boots.session import run_boot
    from cloudseed.provider.seeds.build import build_seed
    from cloudseed.provider.seeds.spec import InstanceSpec
    from tests.agent.packages import repo

    image, accel, reason = lab
    repository = repo.Repository(str(tmp_path / "repo"))
    try:
        repository.add("hello-cs", "2.0")
        repository.add("pinned-cs", "1.0")
        repository.add("pinned-cs", "1.5")
        repository.add("kernel-cs", "1.0", reboot_required=True)
        repository.publish()
        instance = InstanceSpec(instance_id="iid-packages-0001", hostname="packages-host", name="packages-host",
                                user_data=_user_data(repository.key_armoured, body))
        seed = str(tmp_path / "seed.iso")
        build_seed("nocloud", "iso9660", instance, seed)
        with repo.serve_repository(repository, lifetime=timeout + 120) as served:
            result = run_boot(image, str(tmp_path / "vm"), accel=accel, accel_reason=reason, seeds=[seed],
                              timeout=timeout, forwards=[(GUEST_ADDRESS, GUEST_PORT, served.port)])
            requests = served.requests
    finally:
        repository.close()
    assert not result.timed_out, f"agent did not finish; console: {result.console_log}"
    with open(result.console_log, errors="replace") as handle:
        console = handle.read()
    return result, requests, console


def _marked(console: str, mark: str) -> list[str]:
    return [line[line.index(mark):].strip() for line in console.splitlines() if mark in line]


def _no_package_errors(result) -> None:
    status = result.status or {}
    problems = " ".join(str(e) for e in status.get("errors", []))
    assert "package" not in problems and "apt" not in problems, status


def test_boot_adds_a_source_and_installs_from_it(lab, tmp_path):
    result, requests, console = _boot(lab, tmp_path, INSTALL, BOOT_TIMEOUT)
    assert any(p.endswith("/InRelease") for p in requests), requests
    assert "/pool/main/hello-cs_2.0_all.deb" in requests and "/pool/main/pinned-cs_1.0_all.deb" in requests
    assert _marked(console, "PKGCHECK ") == ["PKGCHECK hello-cs install ok installed 2.0",
                                             "PKGCHECK pinned-cs install ok installed 1.0"], console[-4000:]
    _no_package_errors(result)


@pytest.mark.e2e_extra
def test_reboot_if_required_reboots_and_the_next_boot_goes_on(lab, tmp_path):
    """One kernel boot, the install, a reboot; the second boot runs what came after (runcmd) once."""
    result, requests, console = _boot(lab, tmp_path, REBOOT, BOOT_TIMEOUT * 2)
    assert "/pool/main/kernel-cs_1.0_all.deb" in requests
    kernels = [i for i, line in enumerate(console.splitlines()) if "Linux version" in line]
    assert len(kernels) == 2, f"expected exactly one reboot: {console[-4000:]}"
    runs = _marked(console, "PKGRUN ")
    assert len(runs) == 1, console[-4000:]  # runcmd ran once, in the second boot
    assert [i for i, line in enumerate(console.splitlines()) if "PKGRUN " in line][0] > kernels[1]
    assert requests.count("/pool/main/kernel-cs_1.0_all.deb") == 1
    _no_package_errors(result)
