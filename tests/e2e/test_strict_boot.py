"""A VM on the Azure emulation, strict mode asked by the platform, a boot that fails: fail closed, visibly.

The instance's record carries the tag ``cloudseed-strict: true`` (Azure IMDS ``tagsList``) and its
user-data a ``bootcmd`` that fails and a ``reporting`` handler for the metadata server (no
endpoint: the host of the IMDS the datasource read). The image's configuration (the kernel
command line's ``cc:``) leaves turning strict mode on to the platform and keeps root's key
logins (``strict: {enabled: false, allow_root_login: true}``, ``disable_root: false``). The VM
boots the lab image with Azure's DMI strings and provisioning media against ``cloudseed serve``;
then, from outside: the wire server recorded ``NotReady`` / ``ProvisioningFailed`` with the
reason, the console says why, the user is refused over SSH with the reason (``/run/nologin``,
which ``systemd-user-sessions.service`` would have removed had the agent not masked it) while
root logs in by key, and the registry holds the boot's whole timeline with the instance
``failed`` (what the fleet pages and the admin API show). The one VM test of issue 25 in the
default e2e set.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.e2e.guest import BOOT_TIMEOUT, spec, ssh

USER_DATA = b"""#cloud-config
bootcmd:
  - echo 'the data disk is missing' >&2; exit 3
runcmd:
  - touch /var/tmp/runcmd-ran
reporting:
  platform: {type: cloudseed}
"""
IMAGE_CONFIG = "cc: {strict: {enabled: false, allow_root_login: true}, disable_root: false} end_cc"


def test_strict_azure_boot_fails_closed_and_tells_the_platform(lab, ssh_key, tmp_path):
    from cloudseed.lab.boots.metadata import MetadataServer
    from cloudseed.lab.boots.session import run_boot
    from cloudseed.provider.seeds.build import build_seed

    image, accel, reason = lab
    instance = spec(ssh_key[1], instance_id="iid-strict-0001", marker="strict", data=USER_DATA)
    media = str(tmp_path / "ovf.udf")
    build_seed("azure", "udf", instance, media)
    with MetadataServer(instance, str(tmp_path)) as server:
        tagged = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", server.db, "update",
                                 instance.instance_id, "--tag", "cloudseed-strict=true"],
                                capture_output=True, text=True, timeout=60)
        assert tagged.returncode == 0, tagged.stderr
        result = run_boot(image, str(tmp_path), accel=accel, accel_reason=reason, seeds=[media],
                          metadata_port=server.port, platform="azure", timeout=BOOT_TIMEOUT, ssh_timeout=60,
                          kernel_args=IMAGE_CONFIG, keep=True)
        try:
            user = _ssh_past_reloads(result, ssh_key[0], "azureuser", "true")
            operator = _ssh_past_reloads(result, ssh_key[0], "root",
                                         "cat /run/nologin; systemctl is-enabled systemd-user-sessions.service; "
                                         "test -e /var/tmp/runcmd-ran && echo runcmd ran || echo no runcmd")
        finally:
            result.vm.stop()
        health = server.azure_health()
        shown = subprocess.run([sys.executable, "-m", "cloudseed", "instances", "--db", server.db, "provisioning",
                                instance.instance_id, "--json"], capture_output=True, text=True, timeout=60)
    with open(result.console_log, encoding="utf-8", errors="replace") as handle:
        console = handle.read()
    assert not result.timed_out, f"agent did not finish; console: {result.console_log}"
    assert health is not None and (health["state"], health["substatus"]) == ("NotReady", "ProvisioningFailed"), \
        (health, result.console_log)
    assert "strict mode (datasource metadata)" in health["description"] and "bootcmd" in health["description"]
    assert "STRICT MODE: provisioning FAILED in the network stage" in console
    assert "logins: user logins refused (/run/nologin); root's key logins allowed (strict.allow_root_login)" in console
    assert user.returncode == 255 and "This instance failed to provision: strict mode (datasource metadata)" \
        in user.stderr, user
    assert operator.returncode == 0, operator
    *nologin, sessions, runcmd = operator.stdout.splitlines()  # /run/nologin's two lines, then the others
    assert nologin[0].startswith("This instance failed to provision: strict mode (datasource metadata): the network "
                                 "stage ended with") and "bootcmd" in nologin[0], operator.stdout
    assert nologin[1:] == ["Logins are refused (cloudseed strict mode); the boot's status says more."]
    assert (sessions, runcmd) == ("masked-runtime", "no runcmd"), operator.stdout
    assert (result.status or {}).get("status") == "error", result.status
    provisioning = json.loads(shown.stdout)
    state = provisioning["provisioning"]
    assert state["state"] == "failed" and state["datasource"] == "Azure", state
    assert state["failure"]["name"] in ("init-network/config-bootcmd", "init-network/strict")
    names = [r["name"] for r in provisioning["reports"]]
    for stage in ("init-local", "init-network", "modules-config", "modules-final"):
        assert stage in names, names  # the whole boot, the local stage replayed from the status
    assert "init-network/strict" in names
    # the same registry behind an admin listener: the boot's page, its bars and its failure
    from tests.provider.server.server_support import ADMIN_TOKEN, ServerProcess, http

    admin = ServerProcess(server.db, str(tmp_path / "admin"), ["127.0.0.1:0"])
    try:
        page = http(admin.admin_port, f"/fleet/instances/{instance.instance_id}",
                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    finally:
        admin.stop()
    assert page.status == 200 and 'data-state="failed"' in page.text
    for stage in ("init-local", "init-network", "modules-config", "modules-final"):
        assert f'data-name="{stage}"' in page.text, stage
    assert 'data-name="strict" data-status="fail"' in page.text


def _ssh_past_reloads(result, key: str, user: str, command: str):
    """``ssh``, tried again while the connection is reset before the key exchange: sshd re-executes
    when the RSA host key made in the background lands (reload), and a connection in that moment is
    dropped; the answer of a running sshd (a refusal included) is returned as it is."""
    import time

    for _ in range(10):
        proc = ssh(result, key, user, command)
        if proc.returncode != 255 or "kex_exchange_identification" not in proc.stderr:
            return proc
        time.sleep(2)
    return proc

