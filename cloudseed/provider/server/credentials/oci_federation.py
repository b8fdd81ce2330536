"""An emulation of OCI's federation endpoint (``POST /v1/x509`` on the auth service), where an instance
principal trades its certificate for a security token.

It listens on the addresses of the ``oci_auth_listen`` setting (``--oci-auth-listen HOST:PORT``) and
answers what OCI's answers: ``{"token": JWT}``, or ``{"code": ..., "message": ...}`` with 400, 401 or
404. A request is accepted only when all of these hold: the body's ``certificate`` was issued by the
registry's instance principal CA (``oci_identity.py``) and is valid now; its ``opc-instance`` is a
registered instance; the HTTP signature (``Authorization: Signature ...``, keyId
``TENANCY/fed-x509/SHA1-FINGERPRINT``, rsa-sha256 over ``date (request-target) content-length
content-type x-content-sha256``) verifies with that certificate's key, names its fingerprint and
tenancy, and signs this body (``x-content-sha256``); ``date`` is within five minutes.

The token is an RS256 JWT signed with the registry's credential key (``credential_keys.py``; its
public keys are on the admin listener): ``sub`` the instance OCID, ``ptype`` ``instance``,
``tenant``, ``opc-instance``, ``opc-compartment``, ``jwk`` the session public key the request
carried (as a JSON string, as OCI's tokens have it), valid twenty minutes.

How the SDK is pointed here: ``InstancePrincipalsSecurityTokenSigner(federation_endpoint=
"http://HOST:PORT/v1/x509")``; without that argument the SDK builds
``https://auth.<region>.<realm domain>/v1/x509`` (HTTPS, which this listener does not speak).
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import json
import time
import uuid
from typing import Any

from cloudseed.provider.server.credentials.credential_keys import b64url
from cloudseed.provider.server.engine.http import Request, Response

TOKEN_LIFETIME = 1200
MAX_SKEW = 300
SIGNED_HEADERS = ["date", "(request-target)", "content-length", "content-type", "x-content-sha256"]
JSON = "application/json"


def _error(status: int, code: str, message: str) -> Response:
    return Response(status, json.dumps({"code": code, "message": message}), JSON)


class FederationServer:
    def __init__(self, cache: Any, credentials: Any):
        self.cache = cache
        self.credentials = credentials

    async def handle(self, request: Request) -> Response:
        if request.path != "/v1/x509":
            return _error(404, "NotAuthorizedOrNotFound", f"no such endpoint {request.path}")
        if request.method != "POST":
            return _error(405, "MethodNotAllowed", "use POST")
        return await self.cache.run(self._answer, request)  # RSA and the registry: off the event loop

    def _answer(self, request: Request) -> Response:
        try:
            body = json.loads(request.body)
            certificate = _pem(body["certificate"], "CERTIFICATE")
            session_key = _pem(body["publicKey"], "PUBLIC KEY")
        except (ValueError, KeyError, TypeError):
            return _error(400, "InvalidParameter", "the body must be JSON with certificate and publicKey")
        oci = self.credentials.oci
        try:
            cert = oci.check_leaf(certificate)
            claims = _subject(cert)
            self._check_signature(request, cert, claims["opc-tenant"])
            session = _jwk(session_key)
        except ValueError as error:
            return _error(401, "NotAuthenticated", str(error))
        record = self.cache.registry.get(claims["opc-instance"])
        if record is None:
            return _error(401, "NotAuthenticated", f"no instance {claims['opc-instance']} is registered")
        now = int(time.time())
        token = self.credentials.key.sign_jwt({
            "sub": claims["opc-instance"], "iss": "authService.oracle.com", "aud": "oci", "ptype": "instance",
            "iat": now, "exp": now + TOKEN_LIFETIME, "jti": str(uuid.uuid4()), "tenant": claims["opc-tenant"],
            "opc-instance": claims["opc-instance"], "opc-compartment": claims.get("opc-compartment", ""),
            "opc-certtype": "instance", "jwk": json.dumps(session, separators=(",", ":"))})
        return Response(200, json.dumps({"token": token}), JSON)

    @staticmethod
    def _check_signature(request: Request, cert: Any, tenancy: str) -> None:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        scheme, _, params = request.headers.get("authorization", "").partition(" ")
        if scheme != "Signature":
            raise ValueError("the request is not signed (Authorization: Signature ...)")
        fields = dict(_param(p) for p in params.split(","))
        fingerprint = ":".join(f"{b:02X}" for b in cert.fingerprint(hashes.SHA1()))
        if fields.get("keyId") != f"{tenancy}/fed-x509/{fingerprint}":
            raise ValueError("keyId does not name the certificate's tenancy and fingerprint")
        if fields.get("algorithm") != "rsa-sha256":
            raise ValueError("algorithm must be rsa-sha256")
        names = fields.get("headers", "").split()
        if names != SIGNED_HEADERS:
            raise ValueError(f"the signature must cover: {' '.join(SIGNED_HEADERS)}")
        digest = base64.b64encode(hashlib.sha256(request.body).digest()).decode()
        if request.headers.get("x-content-sha256") != digest:
            raise ValueError("x-content-sha256 does not match the body")
        try:
            sent = email.utils.parsedate_to_datetime(request.headers.get("date", "")).timestamp()
        except (TypeError, ValueError):
            raise ValueError("the date header is missing or not an HTTP date")
        if abs(sent - time.time()) > MAX_SKEW:
            raise ValueError("the date header is more than five minutes from the server's clock")
        lines = []
        for name in names:
            if name == "(request-target)":
                lines.append(f"(request-target): {request.method.lower()} {request.target}")
            else:
                lines.append(f"{name}: {request.headers.get(name, '')}")
        try:
            cert.public_key().verify(base64.b64decode(fields.get("signature", "")), "\n".join(lines).encode(),
                                     padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, ValueError):
            raise ValueError("the request's signature does not verify with the certificate's key")


def _pem(text: Any, label: str) -> bytes:
    """The SDK sends PEM bodies without their armour and newlines: put them back."""
    if not isinstance(text, str) or not text or len(text) > 16384:
        raise ValueError(label)
    raw = base64.b64decode(text, validate=True)
    body = base64.encodebytes(raw).decode("ascii")
    return f"-----BEGIN {label}-----\n{body}-----END {label}-----\n".encode("ascii")


def _param(text: str) -> tuple[str, str]:
    name, _, value = text.strip().partition("=")
    return name, value.strip('"')


def _subject(cert: Any) -> dict[str, str]:
    found = {}
    for attribute in cert.subject:
        name, sep, value = str(attribute.value).partition(":")
        if sep and name.startswith("opc-"):
            found[name] = value
    if "opc-instance" not in found or "opc-tenant" not in found:
        raise ValueError("the certificate's subject names no opc-instance and opc-tenant")
    return found


def _jwk(pem: bytes) -> dict[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = serialization.load_pem_public_key(pem)
    if not isinstance(key, rsa.RSAPublicKey):
        raise ValueError("publicKey must be an RSA public key")
    numbers = key.public_numbers()
    return {"kty": "RSA", "kid": "Ignored", "alg": "RS256",
            "n": b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
            "e": b64url(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big"))}
