"""The signed instance identity: ``dynamic/instance-identity/{signature, pkcs7, rsa2048}``.

One RSA-2048 key and a self-signed certificate per registry, made with ``openssl`` the first
time a server opens the registry and kept in its settings (``ec2_identity_pem``), so every
server process signs with the same key and the operator can publish the certificate
(``cloudseed instances identity-certificate``). Each instance's document is signed once, on
first request, by one ``openssl smime`` run (the PKCS#7 with the document inside, ``rsa2048``);
the detached ``pkcs7`` is a second run; ``signature`` is the RSA-SHA256 signature inside them
(no signed attributes, so it signs the document itself). The result is kept with the instance.
Clients verify as on AWS: ``openssl smime -verify -in rsa2048 -inform PEM -certfile CERT -noverify``.
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
from typing import Any

SETTING = "ec2_identity_pem"
SUBJECT = "/O=cloudseed/CN=cloudseed EC2 instance identity"


class IdentityError(RuntimeError):
    """openssl is missing or failed; the message says which command."""


def make_key_and_certificate() -> str:
    """A new RSA-2048 private key and its self-signed certificate (10 years), as PEM text."""
    with tempfile.TemporaryDirectory(prefix="cloudseed-identity-") as tmp:
        key, cert = os.path.join(tmp, "key.pem"), os.path.join(tmp, "cert.pem")
        _openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                  "-days", "3650", "-subj", SUBJECT, "-sha256"])
        with open(key, encoding="ascii") as k, open(cert, encoding="ascii") as c:
            return k.read() + c.read()


def certificate(pem: str) -> str:
    """The certificate part of the stored PEM (what the operator publishes)."""
    start = pem.index("-----BEGIN CERTIFICATE-----")
    return pem[start:].strip() + "\n"


def shared_pem(registry: Any) -> str:
    """The registry's identity key and certificate, made on first use."""
    return registry.shared_setting(SETTING, make_key_and_certificate)


class IdentitySigner:
    def __init__(self, pem: str):
        self.pem = pem

    def sign(self, document: str) -> dict[str, str]:
        """``signature``, ``pkcs7`` and ``rsa2048`` of ``document`` as the service serves them."""
        with tempfile.TemporaryDirectory(prefix="cloudseed-sign-") as tmp:
            key = os.path.join(tmp, "key.pem")
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(self.pem)
            common = ["smime", "-sign", "-binary", "-noattr", "-md", "sha256", "-signer", key, "-inkey", key,
                      "-outform", "DER"]
            whole = _openssl([*common, "-nodetach"], document.encode())
            detached = _openssl(common, document.encode())
        # SignerInfo's last field (no signed/unsigned attributes) is the 256-byte RSA signature
        if whole[-260:-256] != b"\x04\x82\x01\x00":
            raise IdentityError("openssl smime: unexpected PKCS#7 layout (no RSA-2048 signature at its end)")
        return {"signature": _b64(whole[-256:]), "pkcs7": _b64(detached), "rsa2048": _b64(whole)}


def _b64(blob: bytes) -> str:
    text = base64.b64encode(blob).decode("ascii")
    return "\n".join(text[i:i + 64] for i in range(0, len(text), 64))


def _openssl(args: list[str], stdin: bytes = b"") -> bytes:
    try:
        done = subprocess.run(["openssl", *args], input=stdin, capture_output=True, timeout=60, check=False)
    except FileNotFoundError:
        raise IdentityError("openssl is not installed: it signs EC2 instance identity documents")
    if done.returncode != 0:
        raise IdentityError(f"openssl {args[0]} failed: {done.stderr.decode('utf-8', 'replace').strip()[-300:]}")
    return done.stdout
