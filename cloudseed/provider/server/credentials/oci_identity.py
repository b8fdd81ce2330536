"""OCI instance principals: each instance's certificate and key (``/opc/v2/identity/cert.pem``,
``key.pem``) and the CA that issues them (``intermediate.pem``), made in process with ``cryptography``.

The CA (an RSA-2048 key and a self-signed CA certificate) is the registry's, kept in its settings
(``oci_intermediate_pem``). Each instance's certificate is issued anew every ``ROTATION`` seconds
(valid ``VALIDITY``), and with it a new RSA-2048 key pair: the SDKs read ``cert.pem`` and
``key.pem`` again together whenever they refresh, so the key rotates with the certificate. The
window's key is made the first time the instance asks in that window and kept in the registry's
settings (``oci_leaf_key/<instance id>/<window>``; the previous window's row is then removed, and
all of them with the instance) so that every server process answers the same pair; the
certificate is derived from the key, the instance and the window alone (serial, times, names;
RSA PKCS#1 v1.5 signatures are deterministic), so every process issues the same bytes. The
subject names the instance as OCI's do: ``CN=<instance OCID>`` and the organisational units
``opc-certtype:instance``, ``opc-compartment:<OCID>``, ``opc-instance:<OCID>`` and
``opc-tenant:<OCID>`` (the SDK reads the tenancy from that last one). The federation endpoint
(``oci_federation.py``) trusts what this CA issued, for as long as each certificate is valid.
"""

from __future__ import annotations

import datetime
import hashlib
import time
from typing import Any, Callable

from cloudseed.provider.instance_data import oracle

CA_SETTING = "oci_intermediate_pem"
LEAF_SETTING = "oci_leaf_key/"
ROTATION = 2 * 3600  # a new certificate every two hours
VALIDITY = 3 * 3600  # each valid three hours from its window's start (an hour of overlap)
MAX_KEPT = 4096


def tenancy_id(record: Any) -> str:
    given = record.clouds.get("oracle", {}).get("tenancy_id")
    if given:
        return str(given)
    digest = hashlib.sha256(("tenancy/" + (record.project_id or "cloudseed")).encode()).hexdigest()[:60]
    return f"ocid1.tenancy.oc1..{digest}"


def _new_key_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption()).decode("ascii")


def make_ca(common_name: str = "cloudseed OCI instance principal CA") -> str:
    """A new CA key and its self-signed certificate (10 years), as PEM text."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    pem = _new_key_pem()
    key: Any = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cloudseed"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return pem + cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


class OciIdentity:
    def __init__(self, registry: Any, signer: Any, clock: Callable[[], float] = time.time):
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        self.registry = registry
        self.signer = signer  # the registry's credential key: security tokens (oci_federation.py)
        self.clock = clock
        pem = registry.shared_setting(CA_SETTING, make_ca)
        start = pem.index("-----BEGIN CERTIFICATE-----")
        self.ca_key: Any = serialization.load_pem_private_key(pem[:start].encode("ascii"), password=None)
        self.ca_pem = pem[start:].strip() + "\n"
        self.ca = x509.load_pem_x509_certificate(self.ca_pem.encode("ascii"))
        self._kept: dict[tuple, tuple[str, str]] = {}

    def leaf(self, record: Any) -> tuple[str, str]:
        """``(certificate PEM, key PEM)`` of ``record``'s current window (blocking: the registry, a key)."""
        window = int(self.clock() // ROTATION)
        kept = self._kept.get((record.instance_id, window))
        if kept is not None:
            return kept
        name = f"{LEAF_SETTING}{record.instance_id}/{window}"
        key_pem = self.registry.shared_setting(name, _new_key_pem)
        self.registry.drop_settings(LEAF_SETTING + record.instance_id, keep=name)  # earlier windows' keys
        found = (self._certificate(record, key_pem, window), key_pem)
        if len(self._kept) >= MAX_KEPT:
            self._kept.clear()
        self._kept[(record.instance_id, window)] = found
        return found

    def _certificate(self, record: Any, key_pem: str, window: int) -> str:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import NameOID

        key: Any = serialization.load_pem_private_key(key_pem.encode("ascii"), password=None)
        instance = oracle.instance(record)
        ocid = instance["id"]
        unit = NameOID.ORGANIZATIONAL_UNIT_NAME
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ocid),
                             x509.NameAttribute(unit, "opc-certtype:instance"),
                             x509.NameAttribute(unit, f"opc-compartment:{instance['compartmentId']}"),
                             x509.NameAttribute(unit, f"opc-instance:{ocid}"),
                             x509.NameAttribute(unit, f"opc-tenant:{tenancy_id(record)}")])
        started = datetime.datetime.fromtimestamp(window * ROTATION, datetime.timezone.utc)
        serial = int.from_bytes(hashlib.sha256(f"{record.instance_id}/{window}".encode()).digest()[:16], "big") >> 1
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(self.ca.subject)
                .public_key(key.public_key()).serial_number(serial).not_valid_before(started)
                .not_valid_after(started + datetime.timedelta(seconds=VALIDITY))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .sign(self.ca_key, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")

    def check_leaf(self, pem: bytes) -> Any:
        """The certificate ``pem`` if this CA issued it and it is valid now, else raises ValueError."""
        from cryptography import x509
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric import padding

        cert = x509.load_pem_x509_certificate(pem)
        if cert.issuer != self.ca.subject:
            raise ValueError("the certificate was not issued by this registry's instance principal CA")
        try:
            self.ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(),
                                        cert.signature_hash_algorithm)
        except InvalidSignature:
            raise ValueError("the certificate's signature does not verify with the instance principal CA")
        now = datetime.datetime.fromtimestamp(self.clock(), datetime.timezone.utc)
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            raise ValueError("the certificate is not valid now")
        return cert
