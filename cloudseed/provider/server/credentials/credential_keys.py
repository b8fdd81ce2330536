"""The registry's key for the tokens it issues: GCE identity tokens, Azure managed-identity tokens
and OCI security tokens (RS256 JWTs), with its public half published for verifiers.

One RSA-2048 key and a self-signed certificate per registry, made in process with ``cryptography``
the first time a server needs it and kept in the registry's settings (``credentials_signing_pem``),
so every server process of the registry signs with the same key. The key id (``kid``) is the
first 40 hex digits of the SHA-256 of the public key (DER). The admin listener publishes the
public key (``credential_keys_api.py``): a JWK Set, ``{kid: certificate PEM}`` (the form of
Google's ``oauth2/v1/certs``, which ``google.oauth2.id_token.verify_token`` reads) and PEM.
Provider side only: ``cryptography`` is imported here, never on the agent's boot path.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
from typing import Any

SETTING = "credentials_signing_pem"
SUBJECT = "cloudseed credential issuer"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_key_and_certificate(common_name: str = SUBJECT, ecdsa: bool = False) -> str:
    """A new RSA-2048 (``ecdsa``: ECDSA P-256) private key and its self-signed certificate (10 years,
    subject ``O=cloudseed, CN=common_name``), as PEM text."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    key: Any = ec.generate_private_key(ec.SECP256R1()) if ecdsa else rsa.generate_private_key(65537, 2048)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cloudseed"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    return pem.decode("ascii") + cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


class CredentialKey:
    """The loaded key: ``sign_jwt`` and the published forms of its public half."""

    def __init__(self, pem: str):
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        self.key: Any = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
        start = pem.index("-----BEGIN CERTIFICATE-----")
        self.certificate_pem = pem[start:].strip() + "\n"
        self.certificate = x509.load_pem_x509_certificate(self.certificate_pem.encode("ascii"))
        public = self.key.public_key()
        der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        self.kid = hashlib.sha256(der).hexdigest()[:40]
        self.public_pem = public.public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo).decode("ascii")
        numbers = public.public_numbers()
        self.jwk = {"kty": "RSA", "alg": "RS256", "use": "sig", "kid": self.kid,
                    "n": b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
                    "e": b64url(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big"))}

    def sign(self, data: bytes) -> bytes:
        """RSASSA-PKCS1-v1_5 with SHA-256 over ``data``."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        return self.key.sign(data, padding.PKCS1v15(), hashes.SHA256())

    def sign_jwt(self, claims: dict) -> str:
        """``claims`` as a compact RS256 JWT whose header names this key (``kid``)."""
        header = b64url(json.dumps({"alg": "RS256", "kid": self.kid, "typ": "JWT"}, separators=(",", ":")).encode())
        body = b64url(json.dumps(claims, separators=(",", ":")).encode())
        signing_input = f"{header}.{body}"
        return f"{signing_input}.{b64url(self.sign(signing_input.encode('ascii')))}"

    def jwks(self) -> dict:
        return {"keys": [dict(self.jwk)]}

    def certs(self) -> dict:
        return {self.kid: self.certificate_pem}


def shared_key(registry: Any) -> CredentialKey:
    """The registry's credential key, made on first use and shared by every server of the registry."""
    return CredentialKey(registry.shared_setting(SETTING, make_key_and_certificate))
