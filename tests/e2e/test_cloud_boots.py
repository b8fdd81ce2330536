"""Real VM boots against ``cloudseed serve``'s GCE, DigitalOcean, Hetzner and Oracle emulations.

Each boot gives the VM the platform's DMI strings through qemu's -smbios options (lab/vm.py
PLATFORMS), so the image's generator and the agent detect the platform from local facts as on
the real cloud, and checks the provisioned disk from outside. Only under ``CLOUDSEED_E2E=all``.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from guest import BOOT_TIMEOUT, assert_provisioned, read_disk, spec  # noqa: E402

DATASOURCES = {"gce": "gce", "digitalocean": "digitalocean", "hetzner": "hetzner", "oracle": "oracle"}


@pytest.mark.e2e_extra
@pytest.mark.parametrize("platform", list(DATASOURCES))
def test_public_cloud_metadata_service(lab, ssh_key, tmp_path, platform):
    from cloudseed.lab.metadata import MetadataServer
    from cloudseed.lab.session import run_boot

    image, accel, reason = lab
    with MetadataServer(spec(ssh_key[1]), str(tmp_path)) as server:
        result = run_boot(image, str(tmp_path), accel=accel, accel_reason=reason,
                          metadata_port=server.port, platform=platform, timeout=BOOT_TIMEOUT)
        requests = server.request_count()
    assert not result.timed_out, f"agent did not finish; console: {result.console_log}"
    assert (result.status or {}).get("datasource", "").lower().startswith(DATASOURCES[platform]), result.status
    assert requests > 0
    with read_disk(result) as disk:
        assert_provisioned(disk, ssh_key[1])
