"""Decrypt an instance's posted admin password with the private key, as ``nova get-password`` does.

The guest posts base64 of the password encrypted with RSA PKCS#1 v1.5 to its first ``ssh-rsa``
key (``cloudseed/agent/modules/_admin_password.py``). Here ``openssl pkeyutl -decrypt`` does the RSA with
the private key file (no crypto library is a dependency). openssl reads PEM keys; a key in
OpenSSH's own format (what ``ssh-keygen`` writes by default) is converted first, in a private
temporary copy, with ``ssh-keygen -p -m PEM`` (an unencrypted key only).
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import subprocess
import tempfile


class DecryptError(Exception):
    """The password cannot be decrypted; the message says why in one line."""


def decrypt(ciphertext_b64: str, private_key: str) -> str:
    """The clear password from the stored base64 ciphertext and a private key file."""
    try:
        ciphertext = base64.b64decode("".join(ciphertext_b64.split()), validate=True)
    except (binascii.Error, ValueError):
        raise DecryptError("the stored password is not base64: it was not posted encrypted") from None
    if not os.path.isfile(private_key):
        raise DecryptError(f"--key {private_key}: no such file")
    if shutil.which("openssl") is None:
        raise DecryptError("openssl is not installed (apt install openssl / dnf install openssl)")
    with tempfile.TemporaryDirectory(prefix="cloudseed-key-") as scratch:
        key = _pem_key(private_key, scratch)
        proc = subprocess.run(["openssl", "pkeyutl", "-decrypt", "-inkey", key, "-pkeyopt", "rsa_padding_mode:pkcs1"],
                              input=ciphertext, capture_output=True, timeout=60)
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise DecryptError("openssl could not decrypt it with this key (is it the instance's first ssh-rsa key?)"
                           + (f": {detail[0]}" if detail else ""))
    try:
        return proc.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise DecryptError("the decrypted password is not UTF-8 text: wrong key?") from None


def _pem_key(private_key: str, scratch: str) -> str:
    with open(private_key, "rb") as handle:
        head = handle.read(64)
    if not head.startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----"):
        return private_key
    if shutil.which("ssh-keygen") is None:
        raise DecryptError(f"{private_key} is in OpenSSH format and ssh-keygen (to convert it to PEM) is not installed")
    copy = os.path.join(scratch, "key")
    shutil.copyfile(private_key, copy)
    os.chmod(copy, 0o600)
    proc = subprocess.run(["ssh-keygen", "-p", "-m", "PEM", "-N", "", "-P", "", "-f", copy],
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    if proc.returncode != 0:
        raise DecryptError(f"{private_key}: cannot convert this OpenSSH key to PEM (a passphrase?); "
                           f"convert a copy with `ssh-keygen -p -m PEM -f COPY` and pass that")
    return copy
