"""The admin password (cloudbase-init's and Nova's): generated, set, encrypted, posted once, decrypted.

A real ``cloudseed serve`` on loopback holds the instance (its address 127.0.0.1, an ed25519 key
and then a throw-away RSA key made by ssh-keygen); the agent boots a real Debian root (real
useradd and chpasswd) whose user-data asks for ``admin_password: {post_to_metadata: true}``. The
server stores what the agent posted; ``cloudseed instances password`` and ``openssl pkeyutl``
(what ``nova get-password`` runs) give back the same password, whose crypt(3) hash is the
default user's in /etc/shadow; and the password is in no file of the root.
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import json
import os
import shutil
import subprocess

import pytest

from cloudseed.agent.modules._rsa_pkcs1 import KeyFormatError, encrypt, parse_ssh_rsa

HERE = os.path.dirname(os.path.abspath(__file__))

CLOUDSEED = os.path.join(os.path.dirname(os.path.dirname(HERE)), ".venv", "bin", "cloudseed")
IID = "7d2c1b0a-0000-4000-8000-0000000a11ce"
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGzGHd3dZ8Lq2m0wT1tNcVb3b0kQvKpT0Yh9vR3pW1sX first@example"


def keygen(directory, name: str, *extra: str) -> str:
    path = os.path.join(directory, name)
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-C", name, "-f", path, *extra],
                   check=True, timeout=60)
    return path


def crypt(password: str, setting: str) -> str:
    """libcrypt's crypt(3): the hash of ``password`` with the method and salt of ``setting``."""
    lib = ctypes.CDLL(ctypes.util.find_library("crypt") or "libcrypt.so.1")
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
    return lib.crypt(password.encode(), setting.encode()).decode()


# ------------------------------------------------------------------ RSA PKCS#1 v1.5, no crypto library
def test_encryption_interoperates_with_openssl_and_padding_is_fresh(tmp_path):
    if not shutil.which("ssh-keygen") or not shutil.which("openssl"):
        pytest.skip("needs ssh-keygen and openssl")
    key = keygen(tmp_path, "k", "-m", "PEM")
    with open(key + ".pub") as handle:
        e, n = parse_ssh_rsa(handle.read())
    assert e == 65537 and n.bit_length() == 2048
    secret = b"s3cret-Pa55word"
    one, two = encrypt(secret, e, n), encrypt(secret, e, n)
    assert len(one) == 256 and one != two  # random non-zero padding every time
    for ciphertext in (one, two):
        out = subprocess.run(["openssl", "pkeyutl", "-decrypt", "-inkey", key, "-pkeyopt", "rsa_padding_mode:pkcs1"],
                             input=ciphertext, capture_output=True, check=True, timeout=30)
        assert out.stdout == secret
    with pytest.raises(ValueError, match="message too long for a 2048-bit key: 246 bytes, at most 245"):
        encrypt(b"x" * 246, e, n)


@pytest.mark.parametrize("line,why", [
    (ED25519, "not an ssh-rsa key"),
    ("ssh-rsa", "without its base64 blob"),
    ("ssh-rsa !!!", "not base64"),
    ("ssh-rsa " + base64.b64encode(b"\x00\x00\x00\x07ssh-rsa\x00\x00\x00\x01").decode(), "truncated"),
    ("ssh-rsa " + base64.b64encode(b"\x00\x00\x00\x07ssh-rsa\x00\x00\x00\x01\x03\x00\x00\x00\x01\x05").decode(),
     "has 3 bits; at least 1024"),
])
def test_bad_keys_are_named(line, why):
    with pytest.raises(KeyFormatError, match=why):
        parse_ssh_rsa(line)


# ------------------------------------------------------------------ the whole protocol
@pytest.fixture(scope="module")
def debian_tree(tmp_path_factory):
    if os.geteuid() != 0 or not shutil.which("debootstrap") or not shutil.which("openssl"):
        pytest.skip("needs root, debootstrap and openssl")
    from tests.agent.identity import debian_chroot

    return debian_chroot.unpack(str(tmp_path_factory.mktemp("debian") / "root"))


@pytest.fixture
def cloud(tmp_path, debian_tree):
    from tests.provider.server.server_support import ServerProcess

    rsa = keygen(tmp_path, "id_rsa")  # OpenSSH format, as ssh-keygen writes it by default
    (tmp_path / "ed.pub").write_text(ED25519 + "\n")
    (tmp_path / "user-data").write_text("#cloud-config\nadmin_password:\n  post_to_metadata: true\n")
    db = str(tmp_path / "server.db")
    subprocess.run([CLOUDSEED, "instances", "--db", db, "add", "--id", IID, "--hostname", "pw-host",
                    "--address", "127.0.0.1", "--ssh-key", str(tmp_path / "ed.pub"), "--ssh-key", rsa + ".pub",
                    "--user-data", str(tmp_path / "user-data")], check=True, capture_output=True, timeout=60)
    server = ServerProcess(db, str(tmp_path / "server"), ["127.0.0.1:0"])
    yield server, db, rsa
    server.stop()


def agent_root(tree: str, port: int):
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(tree)
    root.write("/etc/cloudseed/cloud.cfg.d/50-test.cfg", json.dumps({
        "datasource_list": ["OpenStack"],
        "datasource": {"OpenStack": {"metadata_urls": [f"http://127.0.0.1:{port}"], "max_wait": 10, "timeout": 5}},
        "network": {"config": "disabled"},
        "cloud_init_modules": ["users_groups"],
        "cloud_config_modules": ["set_passwords"],
        "cloud_final_modules": ["final_message"],
    }))
    return root


def boot(root) -> int:
    from cloudseed.agent.boot.stages import Agent

    shutil.rmtree(root.path("/run/cloudseed"), ignore_errors=True)
    return Agent(root).run_all()


def shadow_hash(root, user: str) -> str:
    for line in root.read_text("/etc/shadow").splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return fields[1]
    raise AssertionError(f"{user} not in /etc/shadow")


def files_holding(top: str, needle: bytes) -> list[str]:
    found = []
    for directory, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(directory, d))
                   and os.path.join(directory, d) not in (f"{top}/proc", f"{top}/sys", f"{top}/dev")]
        for name in files:
            path = os.path.join(directory, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as handle:
                if needle in handle.read():
                    found.append(path[len(top):])
    return found


def test_the_password_is_set_posted_encrypted_once_and_decrypts_with_the_private_key(cloud, debian_tree, caplog):
    server, db, rsa = cloud
    root = agent_root(debian_tree, server.port)
    with caplog.at_level("DEBUG"):
        assert boot(root) == 0, root.read_text("/run/cloudseed/status.json")
    status = json.loads(root.read_text("/run/cloudseed/status.json"))
    assert status["v1"]["datasource"] == "OpenStack"
    # the server stores base64 of a 2048-bit RSA ciphertext
    stored = server.get("/openstack/latest/password", source="127.0.0.1").text
    assert len(base64.b64decode(stored, validate=True)) == 256
    # the provider decrypts it (an OpenSSH-format key: converted on the way)
    out = subprocess.run([CLOUDSEED, "instances", "--db", db, "password", IID, "--key", rsa],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    password = out.stdout.rstrip("\n")
    assert len(password) == 24 and password.isalnum()
    # nova get-password's way: openssl with a PEM key, PKCS#1 v1.5
    pem = shutil.copy(rsa, rsa + ".pem")
    subprocess.run(["ssh-keygen", "-q", "-p", "-m", "PEM", "-N", "", "-P", "", "-f", pem], check=True, timeout=60)
    nova = subprocess.run(["openssl", "pkeyutl", "-decrypt", "-inkey", pem, "-pkeyopt", "rsa_padding_mode:pkcs1"],
                          input=base64.b64decode(stored), capture_output=True, check=True, timeout=30)
    assert nova.stdout.decode() == password
    # it is the default user's password
    hashed = shadow_hash(root, "debian")
    assert hashed.startswith("$") and crypt(password, hashed) == hashed
    assert crypt(password + "x", hashed) != hashed
    # in clear nowhere: no log, status, result, instance data or any other file of the root
    secret = password.encode()
    assert secret not in caplog.text.encode()
    assert files_holding(debian_tree, secret) == []
    assert files_holding(debian_tree, base64.b64encode(secret)) == []
    # once: a reboot neither makes a new one nor posts again
    assert boot(root) == 0
    assert shadow_hash(root, "debian") == hashed
    assert server.get("/openstack/latest/password", source="127.0.0.1").text == stored


def test_a_password_already_held_by_the_server_is_left_alone(cloud, debian_tree):
    server, db, rsa = cloud
    reply = server.get("/openstack/latest/password", source="127.0.0.1", method="POST", body="posted-by-someone")
    assert reply.status == 200, reply.text
    root = agent_root(debian_tree, server.port)
    shutil.rmtree(root.path("/var/lib/cloudseed"), ignore_errors=True)  # a fresh image
    before = shadow_hash(root, "debian") if "debian:" in root.read_text("/etc/shadow") else None
    assert boot(root) == 0
    assert server.get("/openstack/latest/password", source="127.0.0.1").text == "posted-by-someone"
    after = shadow_hash(root, "debian")
    if before:  # not set again (users_groups, for the new instance, may lock it: a "!" in front)
        assert after.lstrip("!") == before.lstrip("!")
    else:
        assert after.startswith(("!", "*"))
    out = subprocess.run([CLOUDSEED, "instances", "--db", db, "password", IID, "--key", rsa],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr == ("cloudseed instances password: the stored password is not base64: "
                          "it was not posted encrypted\n")


# ------------------------------------------------------------------ refusals, before anything changes
class Datasource:
    def __init__(self, name: str, keys: list[str], subplatform: str = ""):
        self.name, self.public_keys, self.subplatform, self.extra = name, keys, subplatform, {}


@pytest.mark.parametrize("ds,why", [
    (Datasource("NoCloud", []), "the datasource NoCloud has no password API (only the OpenStack metadata service"),
    (Datasource("OpenStack", [ED25519], "metadata (http://127.0.0.1:9)"),
     "the instance has no ssh-rsa public key to encrypt the password with"),
])
def test_without_a_password_api_or_an_rsa_key_nothing_is_set(target, ds, why):
    from cloudseed.agent.modules import ModuleContext, run_module
    from cloudseed.agent.state import Paths

    shadow = "debian:!:19000:0:99999:7:::\n"
    target.write("/etc/shadow", shadow, mode=0o640)
    with open(target.path("/etc/passwd"), "a") as handle:
        handle.write("debian:x:1000:1000:Debian:/home/debian:/bin/bash\n")
    ctx = ModuleContext(root=target, paths=Paths(target), cfg={"admin_password": {"post_to_metadata": True}},
                        instance_id="i-test", stage="config", datasource=ds)
    result = run_module(ctx, "set_passwords", force=True)
    assert result.status == "failed" and why in result.reason
    assert target.read_text("/etc/shadow") == shadow


@pytest.mark.parametrize("section,why", [
    ("yes", "admin_password: expected a mapping"),
    ({"post_to_metadata": "yes"}, "admin_password.post_to_metadata: expected true or false"),
    ({"post_to_metadata": True, "length": 8}, "admin_password.length: expected a number from 12 to 64, got 8"),
    ({"post_to_metadata": True, "lenght": 20}, "admin_password: unknown key 'lenght'"),
])
def test_bad_settings_are_named(section, why):
    from cloudseed.agent.modules._admin_password import AdminPasswordError, settings

    with pytest.raises(AdminPasswordError, match=why.replace("(", r"\(")):
        settings({"admin_password": section})
