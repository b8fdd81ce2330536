"""Azure's attested document (``/metadata/attested/document``): a PKCS#7 with the attested JSON inside.

What Azure's IMDS answers, per its documentation: ``{"encoding": "pkcs7", "signature": BASE64}``,
the PKCS#7 holding ``{"licenseType", "nonce", "plan", "timeStamp": {"createdOn", "expiresOn"},
"vmId", "subscriptionId", "sku"}``. ``nonce`` is the client's (optional; we take up to 32 letters
and digits, as the API's published schema says); without one it is the current UTC time,
``YYYYMMDD-HHMMSS``. ``createdOn`` is the time too (``MM/DD/YY HH:MM:SS -0000``), ``expiresOn``
six hours later. Everything in the document is fixed within one second for one instance and
nonce, so an answer is kept for the second it was made in (``AttestedAnswers``): any number of
reads of the same document in one second cost one signature; a new nonce, or a new second,
costs one.

Signed in process with ``cryptography``; the PKCS#7 is SignedData, SHA-256, the certificate
included, no signed attributes (``pkcs7_der.SignedTemplate``: the builder's frame, so a document
costs one signature). The key is the server's choice (``azure_attested_key``):

- ``ecdsa`` (default): an ECDSA P-256 key and self-signed certificate of the registry
  (``azure_attested_pem``; ``cloudseed instances identity-certificate --azure`` prints it). A
  P-256 signature costs a tenth of an RSA-2048 one. OpenSSL (``smime``/``cms -verify``), Go's and
  .NET's PKCS#7 readers verify either kind.
- ``rsa``: the registry's RSA-2048 identity key, EC2's (``ec2_identity_pem``), for a verifier
  written for Azure's own certificate (RSA) that assumes RSA.

No verifier can chain either certificate to Microsoft's roots. Verify as on Azure:
``openssl smime -verify -inform DER -in SIG -certfile CERT -noverify``.
"""

from __future__ import annotations

import base64
import datetime
import json
import time
from typing import Any, Callable

from cloudseed.provider.server.engine.http import Response

SETTING = "azure_attested_pem"
COMMON_NAME = "cloudseed Azure attested data"
KEYS = ("ecdsa", "rsa")
TIME_FORMAT = "%m/%d/%y %H:%M:%S -0000"
LIFETIME = datetime.timedelta(hours=6)
MAX_KEPT = 4096  # answers kept for the current second, all instances together
JSON = "application/json; charset=utf-8"


def make_key_and_certificate() -> str:
    """A new ECDSA P-256 key and its self-signed certificate (10 years), as PEM text."""
    from cloudseed.provider.server.credentials.credential_keys import make_key_and_certificate as make

    return make(COMMON_NAME, ecdsa=True)


def shared_pem(registry: Any, kind: str = "ecdsa") -> str:
    """The key and certificate that sign attested documents (``kind``: ``ecdsa`` or ``rsa``)."""
    if kind == "rsa":
        from cloudseed.provider.server.credentials.ec2_identity import shared_pem as identity_pem

        return identity_pem(registry)
    return registry.shared_setting(SETTING, make_key_and_certificate)


class AttestedSigner:
    def __init__(self, pem: str):
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        from cloudseed.provider.server.credentials.pkcs7_der import SignedTemplate

        start = pem.index("-----BEGIN CERTIFICATE-----")
        self.key: Any = serialization.load_pem_private_key(pem[:start].encode("ascii"), password=None)
        self.certificate = x509.load_pem_x509_certificate(pem[start:].encode("ascii"))
        self.sign: Callable[[bytes], bytes] = SignedTemplate(self.key, self.certificate).sign  # DER PKCS#7


def document(compute: dict, nonce: str, now: datetime.datetime) -> bytes:
    """The attested JSON of an instance (``compute``: its IMDS compute document) for ``nonce``."""
    attested = {"licenseType": compute.get("licenseType", ""), "nonce": nonce or now.strftime("%Y%m%d-%H%M%S"),
                "plan": compute.get("plan") or {"name": "", "product": "", "publisher": ""},
                "timeStamp": {"createdOn": now.strftime(TIME_FORMAT),
                              "expiresOn": (now + LIFETIME).strftime(TIME_FORMAT)},
                "vmId": compute["vmId"], "subscriptionId": compute["subscriptionId"], "sku": compute["sku"]}
    return json.dumps(attested).encode()


class AttestedAnswers:
    """Signed answers of the current second, by instance and nonce (bounded: ``MAX_KEPT``).

    The key is the ``CachedInstance`` itself: a changed record is a new one, so nothing signed
    for the old record is answered after the change."""

    def __init__(self, signer: AttestedSigner, clock: Callable[[], float] = time.time):
        self.signer = signer
        self.clock = clock
        self.second = -1
        self.kept: dict[tuple[Any, str], Response] = {}
        self.signed = 0  # signatures made (the bench and tests read it)

    def answer(self, instance: Any, compute: dict, nonce: str) -> Response:
        second = int(self.clock())
        if second != self.second:
            self.kept.clear()
            self.second = second
        key = (instance, nonce)
        found = self.kept.get(key)
        if found is None:
            now = datetime.datetime.fromtimestamp(second, datetime.timezone.utc)
            signature = base64.b64encode(self.signer.sign(document(compute, nonce, now))).decode("ascii")
            self.signed += 1
            found = Response(200, json.dumps({"encoding": "pkcs7", "signature": signature}), JSON)
            if len(self.kept) < MAX_KEPT:
                self.kept[key] = found
        return found
