"""Real VM boots against ``cloudseed serve``'s GCE, DigitalOcean, Hetzner, Oracle and Azure emulations.

Each boot gives the VM the platform's DMI strings through qemu's -smbios options (lab/machine/vm.py
PLATFORMS), so the image's generator and the agent detect the platform from local facts as on
the real cloud, and checks the provisioned disk from outside. Azure's VM also gets the
provisioning media (``ovf-env.xml`` on UDF, built by ``seed build --kind azure --fs udf``'s code)
and reaches the wire server at 168.63.129.16, which must have recorded it Ready. Only under
``CLOUDSEED_E2E=all``.
"""

from __future__ import annotations

import pytest

from tests.e2e.guest import BOOT_TIMEOUT, assert_provisioned, read_disk, spec

DATASOURCES = {"gce": "gce", "digitalocean": "digitalocean", "hetzner": "hetzner", "oracle": "oracle",
               "azure": "azure"}


@pytest.mark.e2e_extra
@pytest.mark.parametrize("platform", list(DATASOURCES))
def test_public_cloud_metadata_service(lab, ssh_key, tmp_path, platform):
    from cloudseed.lab.boots.metadata import MetadataServer
    from cloudseed.lab.boots.session import run_boot
    from cloudseed.provider.seeds.build import build_seed

    image, accel, reason = lab
    instance = spec(ssh_key[1])
    seeds = []
    if platform == "azure":  # the provisioning media, as Azure attaches it beside IMDS: UDF
        seeds.append(str(tmp_path / "ovf.udf"))
        build_seed("azure", "udf", instance, seeds[0])
    health = None
    with MetadataServer(instance, str(tmp_path)) as server:
        result = run_boot(image, str(tmp_path), accel=accel, accel_reason=reason, seeds=seeds,
                          metadata_port=server.port, platform=platform, timeout=BOOT_TIMEOUT)
        requests = server.request_count()
        if platform == "azure":
            health = server.azure_health()
    assert not result.timed_out, f"agent did not finish; console: {result.console_log}"
    assert (result.status or {}).get("datasource", "").lower().startswith(DATASOURCES[platform]), result.status
    assert requests > 0
    if platform == "azure":  # the wire server kept the guest's ready report
        assert health is not None and health.get("state") == "Ready", (health, result.console_log)
        # the network config (IMDS has no NIC for the lab's record: the fallback NIC by MAC) came up
        assert result.ssh_ready_at is not None, f"SSH not reached; console: {result.console_log}"
    with read_disk(result) as disk:
        assert_provisioned(disk, ssh_key[1])
        if platform == "azure":  # the OVF's admin user (the record's default) is the default user, with the key
            assert "azureuser:" in disk.text("/etc/passwd")
            assert ssh_key[1] in (disk.text("/home/azureuser/.ssh/authorized_keys") or "")
            assert ", UDF)" in (disk.text("/var/log/cloudseed.log") or "")  # the disc read as UDF, in userspace
