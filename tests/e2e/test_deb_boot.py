"""The switch a user makes: Debian's cloud-init image, `apt install ./cloudseed_*.deb`, boot (issue 13).

The lab image is the reference image (Debian's cloud-init installed by apt) with cloudseed's .deb
built by `dpkg-buildpackage -us -uc -b` and installed over it by apt. A NoCloud boot of it must be
provisioned by cloudseed, with the image's /etc/cloud settings kept, and cloud-init's own command
answering from cloudseed. Slow (an image of its own): CLOUDSEED_E2E=all.
"""

from __future__ import annotations

import pytest

from tests.e2e.guest import assert_provisioned, read_disk, seed_boot, spec


@pytest.mark.e2e_extra
def test_deb_installed_over_cloud_init_provisions_the_instance(lab, ssh_key, tmp_path):
    from cloudseed.lab.images.image import lab_image
    from tests.compat import deb_build

    if not deb_build.can_build():
        pytest.skip("needs dpkg-dev, debhelper, dh-python, pybuild-plugin-pyproject (scripts/setup.sh)")
    deb = deb_build.build_deb(str(tmp_path / "deb"))
    _image, accel, reason = lab
    image = lab_image("deb", deb=deb)
    result = seed_boot((image, accel, reason), str(tmp_path / "boot"), "nocloud", "iso9660", spec(ssh_key[1]))
    assert not result.timed_out, f"agent did not finish; console: {result.console_log}"
    assert result.status is not None, f"no status from the collector; console: {result.console_log}"
    disk = read_disk(result)
    assert_provisioned(disk, ssh_key[1])
    # cloudseed did it, cloud-init is gone, and the image's cloud-init settings are still there
    assert disk.text("/var/lib/cloudseed/data/instance-id").strip() == "iid-e2e-0001"
    assert "cloudseed" in (disk.text("/usr/bin/cloud-init") or "")
    assert disk.stat("/usr/lib/python3/dist-packages/cloudinit/__init__.py") is None
    assert disk.stat("/etc/cloud/cloud.cfg") is not None
    assert disk.stat("/etc/systemd/system/cloudseed.target.wants/cloudseed-local.service") is not None or \
        disk.stat("/lib/systemd/system/cloudseed-local.service") is not None
