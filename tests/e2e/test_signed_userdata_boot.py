"""A VM that requires signed user-data, booted from a signed config drive; and from the same seed with
one byte of the user-data changed.

The image's configuration comes on the kernel command line (``cc: ... end_cc``): the registry's key in
``trusted_userdata_keys`` and ``require_signed_userdata: true``. The seed is built as ``cloudseed seed
build --db`` builds it: signed in process with the registry's key. Results are read from the guest's
disk after power-off. The signed boot is in the default set; the changed seed runs with
``CLOUDSEED_E2E=all``.
"""

from __future__ import annotations

import json
import os

import pytest

from cloudseed.lab.boots.session import run_boot
from cloudseed.provider.seeds.build import build_seed
from tests.e2e.guest import BOOT_TIMEOUT, assert_provisioned, read_disk, spec


@pytest.fixture(scope="module")
def registry():
    from cloudseed.provider.userdata_signing import UserDataSigner, make_key

    return UserDataSigner(make_key())


def _boot(lab, workdir: str, registry, public_key: str, change_one_byte: bool):
    image, accel, reason = lab
    instance = spec(public_key, instance_id="iid-e2e-signed", marker="signed")
    instance.signer = lambda kind, data: registry.sign(kind, instance.instance_id, data)
    seed = os.path.join(workdir, "seed.iso")
    build_seed("configdrive", "iso9660", instance, seed)
    if change_one_byte:      # every copy of the user-data in the image: one byte of it changed
        with open(seed, "rb") as handle:
            data = handle.read()
        assert instance.user_data in data
        changed = instance.user_data.replace(b"signed-host", b"signed-hosT", 1)
        with open(seed, "wb") as handle:
            handle.write(data.replace(instance.user_data, changed))
    trust = {"trusted_userdata_keys": [registry.public_key], "require_signed_userdata": True}
    return run_boot(image, workdir, accel=accel, accel_reason=reason, seeds=[seed], timeout=BOOT_TIMEOUT,
                    kernel_args=f"cc: {json.dumps(trust)} end_cc")


def _console(result) -> str:
    with open(result.console_log, errors="replace") as handle:
        return handle.read()


def test_a_signed_config_drive_boots_with_signatures_required(lab, ssh_key, tmp_path, registry):
    result = _boot(lab, str(tmp_path), registry, ssh_key[1], change_one_byte=False)
    assert not result.timed_out, _console(result)[-3000:]
    with read_disk(result) as disk:
        assert_provisioned(disk, ssh_key[1], marker="signed")
        assert "signature verified" in (disk.text("/var/log/cloudseed.log") or "")


@pytest.mark.e2e_extra
def test_the_same_seed_with_one_byte_changed_boots_to_a_clear_failure(lab, ssh_key, tmp_path, registry):
    result = _boot(lab, str(tmp_path), registry, ssh_key[1], change_one_byte=True)
    assert not result.timed_out, _console(result)[-3000:]
    with read_disk(result) as disk:
        # nothing of that user-data applied (the host name comes from the meta-data, not from it)
        assert disk.text("/etc/e2e/one.txt") is None and disk.text("/var/tmp/e2e-runcmd.log") is None
        assert "tester:" not in (disk.text("/etc/passwd") or "")
        log = disk.text("/var/log/cloudseed.log") or ""
        assert "user-data not applied: its signature does not verify against trusted_userdata_keys for " \
               "instance 'iid-e2e-signed'" in log, log[-3000:]
