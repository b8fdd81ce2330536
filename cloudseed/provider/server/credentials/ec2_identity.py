"""The signed instance identity: ``dynamic/instance-identity/{signature, pkcs7, rsa2048}``.

One RSA-2048 key and a self-signed certificate per registry, made the first time a server needs
them and kept in its settings (``ec2_identity_pem``), so every server process signs with the same
key and the operator can publish the certificate (``cloudseed instances identity-certificate``).
Signing is in process with ``cryptography`` (pyca; imported here only, never on the agent's boot
path): no ``openssl`` run per instance. Each instance's document is signed once, on its first
signed request (one RSA signature, about 0.3 ms): the PKCS#7 SignedData with the document inside
(``rsa2048``; SHA-256, the certificate included, no signed attributes, so the signature is over
the document itself); the detached ``pkcs7`` is the same structure without the document
(re-encoded here); ``signature`` is the RSA-SHA256 signature inside them. The result is kept with
the instance. Clients verify as on AWS:
``openssl smime -verify -in rsa2048 -inform PEM -certfile CERT -noverify``.
"""

from __future__ import annotations

import base64
from typing import Any

from cloudseed.provider.server.credentials.pkcs7_der import children, der

SETTING = "ec2_identity_pem"
COMMON_NAME = "cloudseed EC2 instance identity"


class IdentityError(RuntimeError):
    """The stored key or certificate cannot be used, or a signature came out malformed."""


def make_key_and_certificate() -> str:
    """A new RSA-2048 private key and its self-signed certificate (10 years), as PEM text."""
    from cloudseed.provider.server.credentials.credential_keys import make_key_and_certificate as make

    return make(COMMON_NAME)


def certificate(pem: str) -> str:
    """The certificate part of the stored PEM (what the operator publishes)."""
    start = pem.index("-----BEGIN CERTIFICATE-----")
    return pem[start:].strip() + "\n"


def shared_pem(registry: Any) -> str:
    """The registry's identity key and certificate, made on first use."""
    return registry.shared_setting(SETTING, make_key_and_certificate)


class IdentitySigner:
    def __init__(self, pem: str):
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        try:
            self.key: Any = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
            self.certificate = x509.load_pem_x509_certificate(certificate(pem).encode("ascii"))
        except (ValueError, TypeError) as error:
            raise IdentityError(f"the registry's {SETTING} is not a PEM key and certificate: {error}")

    def sign(self, document: str) -> dict[str, str]:
        """``signature``, ``pkcs7`` and ``rsa2048`` of ``document`` as the service serves them."""
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.serialization import pkcs7

        options = [pkcs7.PKCS7Options.Binary, pkcs7.PKCS7Options.NoAttributes]
        whole = (pkcs7.PKCS7SignatureBuilder().set_data(document.encode()).add_signer(
            self.certificate, self.key, hashes.SHA256()).sign(serialization.Encoding.DER, options))
        # SignerInfo's last field (no signed/unsigned attributes) is the 256-byte RSA signature
        if whole[-260:-256] != b"\x04\x82\x01\x00":
            raise IdentityError("PKCS#7 signing: unexpected layout (no RSA-2048 signature at its end)")
        return {"signature": _b64(whole[-256:]), "pkcs7": _b64(detached(whole)), "rsa2048": _b64(whole)}


def detached(signed: bytes) -> bytes:
    """The PKCS#7 ``signed`` (DER, content inside) without its content: a detached signature.

    ContentInfo{oid, [0]{SignedData{version, digests, encapContentInfo{oid, [0] content},
    certificates, signerInfos}}}: the content goes, every enclosing length is re-encoded."""
    (outer,) = children(signed, 0, len(signed))
    oid, wrapper = children(signed, outer[2], outer[3])
    (signed_data,) = children(signed, wrapper[2], wrapper[3])
    parts = children(signed, signed_data[2], signed_data[3])
    encap = parts[2]
    encap_oid = children(signed, encap[2], encap[3])[0]
    body = b"".join(signed[p[1]:p[3]] for p in parts[:2]) + der(0x30, signed[encap_oid[1]:encap_oid[3]]) \
        + b"".join(signed[p[1]:p[3]] for p in parts[3:])
    return der(0x30, signed[oid[1]:oid[3]] + der(0xA0, der(0x30, body)))


def _b64(blob: bytes) -> str:
    text = base64.b64encode(blob).decode("ascii")
    return "\n".join(text[i:i + 64] for i in range(0, len(text), 64))
