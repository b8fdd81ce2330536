"""Azure's attested document (``/metadata/attested/document``): a PKCS#7 with the attested JSON inside.

Signed in process with ``cryptography`` (no ``openssl`` run per request) with the registry's
identity key and certificate, the same that sign EC2's identity documents
(``ec2_identity.shared_pem``; ``cloudseed instances identity-certificate`` prints the certificate):
SignedData, SHA-256, RSA, the certificate included, no signed attributes. Verify as on Azure:
``openssl smime -verify -inform DER -in SIG -certfile CERT -noverify``.
"""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any

from cloudseed.provider.instance_data import azure

TIME_FORMAT = "%m/%d/%y %H:%M:%S -0000"


class AttestedSigner:
    def __init__(self, pem: str):
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        self.key: Any = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
        start = pem.index("-----BEGIN CERTIFICATE-----")
        self.certificate = x509.load_pem_x509_certificate(pem[start:].encode("ascii"))

    def sign(self, data: bytes) -> bytes:
        """``data`` inside a PKCS#7 SignedData (DER)."""
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.serialization import pkcs7

        options = [pkcs7.PKCS7Options.Binary, pkcs7.PKCS7Options.NoAttributes]
        return (pkcs7.PKCS7SignatureBuilder().set_data(data).add_signer(self.certificate, self.key, hashes.SHA256())
                .sign(serialization.Encoding.DER, options))


def document(record: Any, nonce: str, now: datetime.datetime) -> bytes:
    """The attested JSON of ``record`` for ``nonce`` (the time stamp when none is given)."""
    compute = azure.compute(record)
    attested = {"licenseType": "", "nonce": nonce or now.strftime("%Y%m%d-%H%M%S"),
                "plan": {"name": "", "product": "", "publisher": ""},
                "timeStamp": {"createdOn": now.strftime(TIME_FORMAT),
                              "expiresOn": (now + datetime.timedelta(hours=6)).strftime(TIME_FORMAT)},
                "vmId": compute["vmId"], "subscriptionId": compute["subscriptionId"], "sku": compute["sku"]}
    return json.dumps(attested).encode()


def signed_answer(signer: AttestedSigner, record: Any, nonce: str) -> dict[str, str]:
    now = datetime.datetime.now(datetime.timezone.utc)
    return {"encoding": "pkcs7", "signature": base64.b64encode(signer.sign(document(record, nonce, now))).decode()}
