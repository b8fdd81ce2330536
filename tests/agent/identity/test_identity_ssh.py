"""ssh module in temporary roots: host keys (parallel), given keys, authorized keys, ssh_pwauth."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time

import pytest
from identity_support import InputDatasource, run

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen on the host")

DEBIAN_SSHD = "Include /etc/ssh/sshd_config.d/*.conf\nKbdInteractiveAuthentication no\nUsePAM yes\n"
RHEL_SSHD = "HostKey /etc/ssh/ssh_host_rsa_key\n#PasswordAuthentication yes\nPasswordAuthentication no\n" \
            "Subsystem sftp /usr/libexec/openssh/sftp-server\nMatch User backup\n    X11Forwarding no\n"


def keypair(tmp_path, keytype="ed25519", name="k"):
    path = str(tmp_path / name)
    subprocess.run(["ssh-keygen", "-q", "-t", keytype, "-N", "", "-C", f"{name}@test", "-f", path], check=True)
    with open(path) as private, open(path + ".pub") as public:
        return private.read(), public.read().strip()


def with_user(root, name="debian", uid=1000):
    with open(root.path("/etc/passwd"), "a") as handle:
        handle.write(f"{name}:x:{uid}:{uid}:{name}:/home/{name}:/bin/bash\n")
    root.makedirs(f"/home/{name}", mode=0o755, owner=uid, group=uid)


def test_generates_default_key_types_in_parallel(target):
    data = {}
    result, _ = run(target, "ssh", {"ssh_quiet_keygen": True}, instance_data=data)
    assert result.status == "ok", result.reason
    names = set(target.listdir("/etc/ssh"))
    for keytype in ("rsa", "ecdsa", "ed25519"):
        assert f"ssh_host_{keytype}_key" in names and f"ssh_host_{keytype}_key.pub" in names
        assert stat.S_IMODE(target.stat(f"/etc/ssh/ssh_host_{keytype}_key").st_mode) == 0o600
    assert "ssh_host_dsa_key" not in names  # DSA only when asked for
    published = data["ds"]["published_host_keys"]
    assert {k[0] for k in published} == {"ssh-rsa", "ecdsa-sha2-nistp256", "ssh-ed25519"}


def test_key_types_are_generated_side_by_side(tmp_path):
    """The ssh-keygen processes overlap in time: the quick types finish while RSA still runs."""
    from cloudseed.agent import hostkeys
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(str(tmp_path / "r"))
    os.makedirs(root.top)
    started = time.monotonic()
    results = {r.keytype: r for r in hostkeys.generate(root, ["rsa", "ecdsa", "ed25519"], parallel=True)}
    wall = time.monotonic() - started
    assert all(r.ok for r in results.values())
    rsa = results["rsa"]
    for quick in ("ecdsa", "ed25519"):
        assert results[quick].started < rsa.finished and results[quick].finished <= rsa.finished + 0.05
    total = sum(r.finished - r.started for r in results.values())
    assert wall < total  # less than one after another
    print(f"\nkeygen wall {wall:.3f}s vs sum of processes {total:.3f}s")


def test_deletekeys_false_keeps_existing_key(target):
    target.write("/etc/ssh/ssh_host_ed25519_key", "old", mode=0o600)
    run(target, "ssh", {"ssh_deletekeys": False, "ssh_genkeytypes": ["ed25519"]})
    assert target.read_text("/etc/ssh/ssh_host_ed25519_key") == "old"


def test_deletekeys_removes_old_keys(target):
    target.write("/etc/ssh/ssh_host_dsa_key", "old", mode=0o600)
    run(target, "ssh", {"ssh_genkeytypes": ["ed25519"], "ssh_quiet_keygen": True})
    assert not target.exists("/etc/ssh/ssh_host_dsa_key")
    assert target.exists("/etc/ssh/ssh_host_ed25519_key")


def test_given_keys_installed_and_bad_one_not_written(target, tmp_path):
    private, public = keypair(tmp_path)
    cfg = {"ssh_keys": {"ed25519_private": private, "ed25519_public": public,
                        "rsa_private": "not a key", "rsa_public": "ssh-rsa AAAA"}}
    result, _ = run(target, "ssh", cfg)
    assert result.status == "failed"
    assert "ssh_keys.rsa_private" in result.reason and "ssh_keys.rsa_public" in result.reason
    assert target.read_text("/etc/ssh/ssh_host_ed25519_key") == private
    assert stat.S_IMODE(target.stat("/etc/ssh/ssh_host_ed25519_key").st_mode) == 0o600
    assert not target.exists("/etc/ssh/ssh_host_rsa_key") and not target.exists("/etc/ssh/ssh_host_rsa_key.pub")
    assert "not a key" not in result.reason  # the key material is never echoed


def test_rhel_private_host_keys_belong_to_ssh_keys_group(rhel_target):
    run(rhel_target, "ssh", {"ssh_genkeytypes": ["ed25519"], "ssh_quiet_keygen": True})
    info = rhel_target.stat("/etc/ssh/ssh_host_ed25519_key")
    assert info.st_gid == 996 and stat.S_IMODE(info.st_mode) == 0o640


def test_authorized_keys_default_user_and_root(target, tmp_path):
    with_user(target)
    _, key = keypair(tmp_path, name="ds")
    _, extra = keypair(tmp_path, name="cfg")
    ds = InputDatasource(public_keys=[key])
    result, _ = run(target, "ssh", {"users": ["default"], "ssh_genkeytypes": [], "ssh_authorized_keys": [extra]},
                    datasource=ds)
    assert result.status == "ok", result.reason
    path = "/home/debian/.ssh/authorized_keys"
    text = target.read_text(path)
    assert key in text and extra in text
    info = target.stat(path)
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == 1000
    assert stat.S_IMODE(target.stat("/home/debian/.ssh").st_mode) == 0o700
    root_keys = target.read_text("/root/.ssh/authorized_keys")
    assert 'Please login as the user \\"debian\\" rather than the user \\"root\\".' in root_keys
    assert root_keys.startswith("no-port-forwarding,")


def test_disable_root_false_and_no_public_keys(target, tmp_path):
    with_user(target)
    _, key = keypair(tmp_path, name="ds")
    _, extra = keypair(tmp_path, name="cfg")
    run(target, "ssh", {"users": ["default"], "ssh_genkeytypes": [], "disable_root": False,
                        "allow_public_ssh_keys": False, "ssh_authorized_keys": [extra]},
        datasource=InputDatasource(public_keys=[key]))
    assert target.read_text("/root/.ssh/authorized_keys") == extra + "\n"
    assert key not in target.read_text("/home/debian/.ssh/authorized_keys")


def test_malformed_authorized_key_reported_others_installed(target, tmp_path):
    with_user(target)
    _, good = keypair(tmp_path)
    broken = good[:40]
    result, _ = run(target, "ssh", {"users": ["default"], "ssh_genkeytypes": [], "ssh_authorized_keys": [broken, good]})
    assert result.status == "failed" and "ssh_authorized_keys[0]" in result.reason
    text = target.read_text("/home/debian/.ssh/authorized_keys")
    assert good in text and broken + "\n" not in text


def test_pwauth_uses_drop_in_when_included(target):
    target.write("/etc/ssh/sshd_config", DEBIAN_SSHD)
    run(target, "ssh", {"ssh_genkeytypes": [], "ssh_pwauth": True})
    assert target.read_text("/etc/ssh/sshd_config") == DEBIAN_SSHD
    assert target.read_text("/etc/ssh/sshd_config.d/50-cloudseed.conf") == "PasswordAuthentication yes\n"


def test_pwauth_in_place_edit_without_include(rhel_target):
    rhel_target.write("/etc/ssh/sshd_config", RHEL_SSHD)
    run(rhel_target, "ssh", {"ssh_genkeytypes": [], "ssh_pwauth": True})
    text = rhel_target.read_text("/etc/ssh/sshd_config")
    assert "PasswordAuthentication yes\n" in text and "\nPasswordAuthentication no" not in text
    assert "#PasswordAuthentication yes" in text  # comments kept
    run(rhel_target, "ssh", {"ssh_genkeytypes": [], "ssh_pwauth": "unchanged"})
    assert rhel_target.read_text("/etc/ssh/sshd_config") == text


def test_pwauth_added_before_match_block(target):
    target.write("/etc/ssh/sshd_config", "UsePAM yes\nMatch User x\n    PasswordAuthentication no\n")
    run(target, "ssh", {"ssh_genkeytypes": [], "ssh_pwauth": False})
    text = target.read_text("/etc/ssh/sshd_config")
    assert text.index("PasswordAuthentication no\n\nMatch") < text.index("Match User x")


def test_publish_hostkeys_disabled_and_blacklist(target):
    data = {}
    run(target, "ssh", {"ssh_genkeytypes": ["ed25519", "ecdsa"], "ssh_quiet_keygen": True,
                        "ssh_publish_hostkeys": {"enabled": True, "blacklist": ["ecdsa"]}}, instance_data=data)
    assert [k[0] for k in data["ds"]["published_host_keys"]] == ["ssh-ed25519"]
    data = {}
    run(target, "ssh", {"ssh_genkeytypes": ["ed25519"], "ssh_publish_hostkeys": {"enabled": False}},
        instance_data=data)
    assert "published_host_keys" not in data.get("ds", {})
