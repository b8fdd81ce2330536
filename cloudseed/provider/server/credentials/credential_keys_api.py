"""The admin listener's public credential endpoints: what a verifier of our tokens fetches.

No bearer token is needed (they publish public keys, as the clouds' own endpoints do):
``GET /v1/keys/jwks`` (a JWK Set: ``google.oauth2.id_token.verify_token``'s JWKS form, and what JWT
libraries read), ``GET /v1/keys/certs`` (``{kid: certificate PEM}``, the form of Google's
``oauth2/v1/certs``), ``GET /v1/keys/pem`` (the certificate as PEM), and
``GET /v1/credentials/gce/tokeninfo?access_token=T`` (what a GCE access token grants, as
Google's tokeninfo answers; 400 ``invalid_token`` once it has expired or when it is not ours).
"""

from __future__ import annotations

import json
from typing import Any, Optional
from urllib.parse import parse_qsl

from cloudseed.provider.server.engine.http import Response

PATHS = ("/v1/keys/jwks", "/v1/keys/certs", "/v1/keys/pem", "/v1/credentials/gce/tokeninfo")
JSON = "application/json"


def handle(credentials: Any, method: str, path: str, query: str) -> Optional[Response]:
    """The answer for one of ``PATHS`` (None for any other path)."""
    if path not in PATHS:
        return None
    if method not in ("GET", "HEAD"):
        return Response(405, json.dumps({"error": "method not allowed; use GET"}) + "\n", JSON,
                        [("Allow", "GET, HEAD")])
    if path == "/v1/keys/jwks":
        return Response(200, json.dumps(credentials.key.jwks(), indent=1) + "\n", JSON,
                        [("Cache-Control", "public, max-age=3600")])
    if path == "/v1/keys/certs":
        return Response(200, json.dumps(credentials.key.certs(), indent=1) + "\n", JSON,
                        [("Cache-Control", "public, max-age=3600")])
    if path == "/v1/keys/pem":
        return Response(200, credentials.key.certificate_pem, "application/x-pem-file")
    token = dict(parse_qsl(query or "")).get("access_token", "")
    info = credentials.gce.token_info(token) if token else None
    if info is None:
        return Response(400, json.dumps({"error": "invalid_token", "error_description": "Invalid Value"}) + "\n",
                        JSON)
    return Response(200, json.dumps(info, indent=1) + "\n", JSON)
