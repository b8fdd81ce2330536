"""The signed instance identity: ``dynamic/instance-identity/{signature, pkcs7, rsa2048}``.

One RSA-2048 key and a self-signed certificate per registry, made with ``openssl`` the first
time a server opens the registry and kept in its settings (``ec2_identity_pem``), so every
server process signs with the same key and the operator can publish the certificate
(``cloudseed instances identity-certificate``). Each instance's document is signed once, on
first request, by one ``openssl smime`` run: the PKCS#7 with the document inside (``rsa2048``);
the detached ``pkcs7`` is the same structure without the document (re-encoded here);
``signature`` is the RSA-SHA256 signature inside them (no signed attributes, so it signs the
document itself). The result is kept with the instance.
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
            whole = _openssl(["smime", "-sign", "-binary", "-noattr", "-nodetach", "-md", "sha256", "-signer", key,
                              "-inkey", key, "-outform", "DER"], document.encode())
        # SignerInfo's last field (no signed/unsigned attributes) is the 256-byte RSA signature
        if whole[-260:-256] != b"\x04\x82\x01\x00":
            raise IdentityError("openssl smime: unexpected PKCS#7 layout (no RSA-2048 signature at its end)")
        return {"signature": _b64(whole[-256:]), "pkcs7": _b64(detached(whole)), "rsa2048": _b64(whole)}


def detached(signed: bytes) -> bytes:
    """The PKCS#7 ``signed`` (DER, content inside) without its content: a detached signature.

    ContentInfo{oid, [0]{SignedData{version, digests, encapContentInfo{oid, [0] content},
    certificates, signerInfos}}}: the content goes, every enclosing length is re-encoded."""
    (outer,) = _children(signed, 0, len(signed))
    oid, wrapper = _children(signed, outer[2], outer[3])
    (signed_data,) = _children(signed, wrapper[2], wrapper[3])
    parts = _children(signed, signed_data[2], signed_data[3])
    encap = parts[2]
    encap_oid = _children(signed, encap[2], encap[3])[0]
    body = b"".join(signed[p[1]:p[3]] for p in parts[:2]) + _der(0x30, signed[encap_oid[1]:encap_oid[3]]) \
        + b"".join(signed[p[1]:p[3]] for p in parts[3:])
    return _der(0x30, signed[oid[1]:oid[3]] + _der(0xA0, _der(0x30, body)))


def _children(blob: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, start, body start, end) of each DER element in ``blob[start:end]``."""
    found = []
    while start < end:
        tag, first = blob[start], blob[start + 1]
        if first < 0x80:
            body, length = start + 2, first
        else:
            count = first & 0x7F
            if not 1 <= count <= 4:
                raise IdentityError("openssl smime: PKCS#7 output is not definite-length DER")
            body, length = start + 2 + count, int.from_bytes(blob[start + 2:start + 2 + count], "big")
        found.append((tag, start, body, body + length))
        start = body + length
    if start != end:
        raise IdentityError("openssl smime: malformed PKCS#7 output")
    return found


def _der(tag: int, body: bytes) -> bytes:
    size = len(body)
    if size < 0x80:
        return bytes((tag, size)) + body
    count = (size.bit_length() + 7) // 8
    return bytes((tag, 0x80 | count)) + size.to_bytes(count, "big") + body


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
