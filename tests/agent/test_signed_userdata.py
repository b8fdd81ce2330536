"""Signed user-data on the guest: NoCloud and config-drive seeds signed by a user's key (``ssh-keygen``)
and by the registry's key (signed in process), checked by the agent with ``ssh-keygen -Y verify``.

Each case is a whole boot of a temporary root (the four stages). The agent's verdicts: a valid
signature for this instance is applied; changed data, another instance's signature or another
key is refused (an error, whether or not signatures are required); a missing signature is refused
only with ``require_signed_userdata``. The API side (every metadata API) is in
``tests/provider/server/test_signed_userdata_api.py``; the boot through namespaces in
``tests/agent/datasources/test_signed_userdata_every_api.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from cloudseed.agent.boot.stages import Agent
from cloudseed.core.userdata_signatures import SignatureError, sign_with_ssh_keygen, verify

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOCLOUD = "/var/lib/cloud/seed/nocloud"
CONFIG_DRIVE = "/var/lib/cloud/seed/config_drive"
USER_DATA = b"#cloud-config\nwrite_files: [{path: /etc/from-signed-user-data, content: applied}]\n"
VENDOR_DATA = b"#cloud-config\nfqdn: from-vendor-data.example\n"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two users' key pairs (``ssh-keygen``): (private path, public line) each."""
    if not shutil.which("ssh-keygen"):
        pytest.skip("needs ssh-keygen (openssh-client)")
    out = []
    for name in ("trusted", "other"):
        path = str(tmp_path_factory.mktemp("keys") / name)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path], check=True)
        with open(path + ".pub") as handle:
            out.append((path, handle.read().strip()))
    return out


def _boot(root, trusted: list[str], require: bool, seed: dict[str, bytes], where: str = NOCLOUD) -> dict:
    config = {"network": {"config": "disabled"}, "cloud_init_modules": ["write_files"], "cloud_config_modules": [],
              "cloud_final_modules": [], "trusted_userdata_keys": trusted, "require_signed_userdata": require}
    root.write("/etc/cloudseed/cloud.cfg.d/00-trust.cfg", json.dumps(config))
    for name, data in seed.items():
        root.write(f"{where}/{name}", data, mode=0o600)
    shutil.rmtree(os.path.join(root.top, "run"), ignore_errors=True)
    Agent(root).run_all()
    return json.loads(root.read_text("/run/cloudseed/status.json"))["v1"]


def _combined(root) -> dict:
    """The config the modules ran with (system, vendor-data, user-data merged)."""
    return json.loads(root.read_text("/run/cloudseed/combined-cloud-config.json"))


def _nocloud(iid: str, user: bytes = USER_DATA, signature: str | None = None, **more: bytes) -> dict[str, bytes]:
    seed = {"meta-data": f"instance-id: {iid}\n".encode(), "user-data": user, **more}
    if signature is not None:
        seed["user-data.sig"] = signature.encode()
    return seed


def test_signed_by_a_trusted_key_for_this_instance_is_applied(target, keys):
    (key, public), _ = keys
    v1 = _boot(target, [public], True, _nocloud("i-1", signature=sign_with_ssh_keygen(key, "user-data", "i-1",
                                                                                       USER_DATA)))
    assert v1["init"]["errors"] == []
    assert target.read_text("/etc/from-signed-user-data") == "applied"


@pytest.mark.parametrize("case", ["one byte changed", "another instance's", "another key", "signed as vendor-data",
                                  "not a signature"])
def test_refused_signatures_fail_closed_with_a_clear_status(target, keys, case):
    (key, public), (other_key, _) = keys
    user, iid, signer, kind = USER_DATA, "i-1", key, "user-data"
    if case == "another instance's":
        iid = "i-2"
    if case == "another key":
        signer = other_key
    if case == "signed as vendor-data":
        kind = "vendor-data"
    signature = sign_with_ssh_keygen(signer, kind, iid, user)
    if case == "one byte changed":
        user = user.replace(b"applied", b"applieD")
    if case == "not a signature":
        signature = "hello"
    v1 = _boot(target, [public], True, _nocloud("i-1", user=user, signature=signature))
    assert not target.exists("/etc/from-signed-user-data")
    errors = " ".join(v1["init"]["errors"])
    assert "user-data not applied: its signature" in errors, errors
    if case == "not a signature":
        assert "not an SSH signature" in errors
    else:
        assert "does not verify against trusted_userdata_keys for instance 'i-1'" in errors
    assert v1["modules-final"]["finished"]                      # the boot went on, with the image's config


def test_unsigned_is_refused_only_when_signatures_are_required(target, keys):
    (key, public), _ = keys
    v1 = _boot(target, [public], True, _nocloud("i-1"))
    assert not target.exists("/etc/from-signed-user-data")
    assert v1["init"]["errors"] == ["user-data not applied: it is not signed and require_signed_userdata is set "
                                    "(datasource NoCloud gave no signature)"]
    v1 = _boot(target, [public], False, _nocloud("i-1"))
    assert v1["init"]["errors"] == [] and target.read_text("/etc/from-signed-user-data") == "applied"
    # not required, but signed badly: still refused (a bad signature is evidence of tampering)
    target.remove("/etc/from-signed-user-data")
    bad = sign_with_ssh_keygen(key, "user-data", "i-9", USER_DATA)
    v1 = _boot(target, [public], False, _nocloud("i-1", signature=bad))
    assert not target.exists("/etc/from-signed-user-data") and v1["init"]["errors"]


def test_user_data_cannot_trust_its_own_key_or_switch_the_check_off(target, keys):
    (_, public), (other_key, other_public) = keys
    own = b"#cloud-config\ntrusted_userdata_keys: ['" + other_public.encode() + b"']\n" + \
          b"require_signed_userdata: false\n" + USER_DATA.split(b"\n", 1)[1]
    v1 = _boot(target, [public], True, _nocloud("i-1", user=own,
                                                 signature=sign_with_ssh_keygen(other_key, "user-data", "i-1", own)))
    assert not target.exists("/etc/from-signed-user-data")
    assert "does not verify" in " ".join(v1["init"]["errors"])


def test_vendor_data_is_checked_on_its_own(target, keys):
    (key, public), _ = keys
    seed = _nocloud("i-1", signature=sign_with_ssh_keygen(key, "user-data", "i-1", USER_DATA),
                    **{"vendor-data": VENDOR_DATA})
    v1 = _boot(target, [public], True, seed)
    assert target.read_text("/etc/from-signed-user-data") == "applied"
    assert "fqdn" not in _combined(target)
    assert v1["init"]["errors"] == ["vendor-data not applied: it is not signed and require_signed_userdata is set "
                                    "(datasource NoCloud gave no signature)"]
    seed["vendor-data.sig"] = sign_with_ssh_keygen(key, "vendor-data", "i-1", VENDOR_DATA).encode()
    v1 = _boot(target, [public], True, seed)
    assert v1["init"]["errors"] == [] and _combined(target)["fqdn"] == "from-vendor-data.example"


def _seed_files(kind: str, iid: str, signer, vendor: bool = True) -> dict[str, bytes]:
    from cloudseed.provider.seeds.build import seed_files
    from cloudseed.provider.seeds.spec import InstanceSpec

    spec = InstanceSpec(instance_id=iid, user_data=USER_DATA, vendor_data=VENDOR_DATA.decode() if vendor else None)
    spec.signer = signer
    return seed_files(kind, spec)[0]


def test_registry_signed_seeds_of_both_kinds_boot_and_verify_with_openssh(target):
    """The registry's key signs in process (no ssh-keygen per instance); OpenSSH accepts the result."""
    from cloudseed.provider.userdata_signing import UserDataSigner, make_key

    registry = UserDataSigner(make_key())
    files = _seed_files("nocloud", "i-reg", lambda kind, data: registry.sign(kind, "i-reg", data))
    assert sorted(n for n in files if n.endswith(".sig")) == ["user-data.sig", "vendor-data.sig"]
    verify(files["vendor-data"], files["vendor-data.sig"], "vendor-data", "i-reg", [registry.public_key])
    v1 = _boot(target, [registry.public_key], True, files)
    assert v1["init"]["errors"] == []
    assert target.read_text("/etc/from-signed-user-data") == "applied"
    assert _combined(target)["fqdn"] == "from-vendor-data.example"



VENDOR_DATA2 = "#cloud-config\nbootcmd: [from-vendor-data2]\n"


def test_config_drive_json_vendor_data_is_signed_as_written_and_checked_before_unwrapping(target):
    """vendor_data.json and vendor_data2.json: the seed builder signs each document as written, the
    agent checks it (as its own kind) before taking the cloud-init part out; one changed byte in
    the JSON refuses that vendor data and nothing else."""
    from cloudseed.provider.seeds.build import seed_files
    from cloudseed.provider.seeds.spec import InstanceSpec
    from cloudseed.provider.userdata_signing import UserDataSigner, make_key

    registry = UserDataSigner(make_key())
    spec = InstanceSpec(instance_id="i-reg", user_data=USER_DATA, vendor_data=VENDOR_DATA.decode(),
                        vendor_data2={"cloud-init": VENDOR_DATA2})
    spec.signer = lambda kind, data: registry.sign(kind, "i-reg", data)
    drive = seed_files("configdrive", spec)[0]
    signed = sorted(n for n in drive if n.endswith(".sig"))
    assert {"openstack/latest/user_data.sig", "ec2/latest/user-data.sig", "openstack/latest/vendor_data.json.sig",
            "openstack/latest/vendor_data2.json.sig"} <= set(signed)
    for name, kind in (("vendor_data.json", "vendor-data"), ("vendor_data2.json", "vendor-data2")):
        document = drive[f"openstack/latest/{name}"]
        verify(document, drive[f"openstack/latest/{name}.sig"], kind, "i-reg", [registry.public_key])  # OpenSSH
    v1 = _boot(target, [registry.public_key], True, drive, where=CONFIG_DRIVE)
    assert v1["init"]["errors"] == [], v1["init"]["errors"]
    assert target.read_text("/etc/from-signed-user-data") == "applied"
    combined = _combined(target)
    assert combined["fqdn"] == "from-vendor-data.example" and combined["bootcmd"] == ["from-vendor-data2"]

    changed = dict(drive)  # the vendor data changed on its way: same length, one letter
    for version in {n.split("/")[1] for n in drive if n.startswith("openstack/")}:
        name = f"openstack/{version}/vendor_data.json"
        if name in changed:
            changed[name] = changed[name].replace(b"from-vendor-data", b"from-vendor-dato")
    target.remove_tree("/var/lib/cloudseed")
    target.remove("/etc/from-signed-user-data")
    v1 = _boot(target, [registry.public_key], True, changed, where=CONFIG_DRIVE)
    assert [e.split(":")[0] for e in v1["init"]["errors"]] == ["vendor-data not applied"], v1["init"]["errors"]
    assert "does not verify" in v1["init"]["errors"][0]
    assert target.read_text("/etc/from-signed-user-data") == "applied"
    combined = _combined(target)
    assert "fqdn" not in combined and combined["bootcmd"] == ["from-vendor-data2"]
    with pytest.raises(SignatureError, match="instance 'i-other'"):
        verify(USER_DATA, drive["openstack/latest/user_data.sig"], "user-data", "i-other", [registry.public_key])


def test_userdata_sign_and_verify_commands(tmp_path, keys):
    (key, public), _ = keys
    data = tmp_path / "user-data"
    data.write_bytes(USER_DATA)
    (tmp_path / "trusted.pub").write_text(public + "\n")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cloudseed", "userdata", *args], cwd=REPO, capture_output=True,
                              text=True, timeout=60)

    signed = cli("sign", str(data), "--key", key, "--instance-id", "i-cli")
    assert signed.returncode == 0, signed.stderr
    assert (tmp_path / "user-data.sig").read_text().startswith("-----BEGIN SSH SIGNATURE-----")
    good = cli("verify", str(data), "--instance-id", "i-cli", "--trusted-key", str(tmp_path / "trusted.pub"))
    assert good.returncode == 0 and "good signature" in good.stdout
    replayed = cli("verify", str(data), "--instance-id", "i-next", "--trusted-key", str(tmp_path / "trusted.pub"))
    assert replayed.returncode == 1 and "does not verify" in replayed.stderr
