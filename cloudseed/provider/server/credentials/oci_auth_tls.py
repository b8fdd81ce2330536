"""TLS for OCI's federation endpoint emulation, so that the SDKs reach it at the address they build.

Without a ``federation_endpoint`` argument, the oci SDK (and the OCI CLI, Terraform) trades its
instance certificate at ``https://auth.<region>.<realm domain>/v1/x509``. With
``oci_auth_tls_listen`` (``--oci-auth-tls-listen HOST:443``) the server answers there in TLS:
the operator points those names at HOST in the instances' network (DNS, or a hosts entry) and
gives the instances the CA below (the SDK verifies with ``requests``: ``REQUESTS_CA_BUNDLE``).

The CA is the registry's (``oci_auth_ca_pem``: RSA-2048, 10 years, with the extensions strict
verification wants, such as Python 3.13's default ``VERIFY_X509_STRICT``); ``cloudseed instances
identity-certificate --oci-auth`` prints it. It is not the instance principal CA
(``oci_identity.py``): that one vouches for instances, this one for the endpoint, and registries
made before this one have an instance principal CA without a subject key identifier, which
strict verifiers refuse. Each server process makes its own ECDSA P-256 server key at start (never
stored) and a certificate from the CA naming ``auth.<region>.<realm domain>`` for every region of
the OCI region table (``instance_data/oci_regions.py``), valid as long as the CA.
"""

from __future__ import annotations

import datetime
import os
import ssl
import tempfile
from typing import Any

from cloudseed.provider.instance_data import oci_regions

CA_SETTING = "oci_auth_ca_pem"
CA_NAME = "cloudseed OCI federation endpoint CA"


def names() -> list[str]:
    """``auth.<region>.<realm domain>`` of every region in the table, as the SDK builds them."""
    return [f"auth.{region}.{oci_regions.REALM_DOMAINS[realm]}"
            for region, (_key, realm) in sorted(oci_regions.REGIONS.items())]


def shared_ca(registry: Any) -> str:
    """The CA's key and certificate (PEM), made on first use and kept in the registry."""
    from cloudseed.provider.server.credentials.oci_identity import make_ca

    return registry.shared_setting(CA_SETTING, lambda: make_ca(CA_NAME))


def certificate(pem: str) -> str:
    return pem[pem.index("-----BEGIN CERTIFICATE-----"):].strip() + "\n"


def server_certificate(ca_pem: str) -> tuple[str, str]:
    """A new server key and its certificate from the CA for ``names()``, as PEM texts."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    start = ca_pem.index("-----BEGIN CERTIFICATE-----")
    ca_key: Any = serialization.load_pem_private_key(ca_pem[:start].encode("ascii"), password=None)
    ca = x509.load_pem_x509_certificate(ca_pem[start:].encode("ascii"))
    key = ec.generate_private_key(ec.SECP256R1())
    hosts = names()
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cloudseed"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(ca.not_valid_after_utc)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM).decode("ascii"),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode("ascii"))


def server_context(registry: Any) -> ssl.SSLContext:
    """The listener's TLS context: TLS 1.2 or later, this process's certificate from the registry's CA."""
    cert_pem, key_pem = server_certificate(shared_ca(registry))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="cloudseed-oci-tls-") as private:  # 0700; gone once loaded
        path = os.path.join(private, "server.pem")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="ascii") as handle:
            handle.write(key_pem + cert_pem)
        context.load_cert_chain(path)
    return context
