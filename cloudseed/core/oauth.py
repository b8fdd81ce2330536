"""OAuth 1.0a with the PLAINTEXT signature (RFC 5849 section 3.4.4), as MAAS uses it: the
``Authorization: OAuth ...`` header a client sends (the agent's MAAS datasource) and its check on
the serving side (the MAAS API of ``cloudseed serve``). No dependency: PLAINTEXT needs no hashing.

The signature is ``escape(consumer_secret) & escape(token_secret)``; the header's values are
percent-encoded again (``%26`` for the ``&``), as oauthlib writes them, so cloud-init's requests
and ours look alike.
"""

from __future__ import annotations

import hmac
import secrets
import time
import urllib.parse

UNRESERVED = "-._~"
# MAAS (piston's OAuth server) refuses timestamps further than this from its clock
DEFAULT_WINDOW = 300


def escape(value: str) -> str:
    return urllib.parse.quote(value, safe=UNRESERVED)


def plaintext_signature(consumer_secret: str, token_secret: str) -> str:
    return f"{escape(consumer_secret)}&{escape(token_secret)}"


def header(consumer_key: str, token_key: str, token_secret: str, consumer_secret: str = "",
           timestamp: int | None = None, nonce: str | None = None) -> str:
    """The ``Authorization`` header value for one request."""
    params = [
        ("oauth_nonce", nonce or str(secrets.randbits(64))),
        ("oauth_timestamp", str(int(time.time()) if timestamp is None else int(timestamp))),
        ("oauth_version", "1.0"),
        ("oauth_signature_method", "PLAINTEXT"),
        ("oauth_consumer_key", consumer_key),
        ("oauth_token", token_key),
        ("oauth_signature", plaintext_signature(consumer_secret, token_secret)),
    ]
    return "OAuth " + ", ".join(f'{k}="{escape(v)}"' for k, v in params)


class OAuthError(Exception):
    """The request's OAuth header is missing, malformed or wrong; the message says which."""


def parse(value: str) -> dict[str, str]:
    """The ``oauth_*`` parameters of an ``Authorization: OAuth ...`` header (decoded); OAuthError else."""
    scheme, _, rest = value.strip().partition(" ")
    if scheme.lower() != "oauth":
        raise OAuthError("the Authorization header is not OAuth")
    params: dict[str, str] = {}
    for item in rest.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, quoted = item.partition("=")
        key = key.strip()
        if not sep or len(quoted) < 2 or quoted[0] != '"' or quoted[-1] != '"':
            raise OAuthError(f"malformed OAuth parameter {item[:40]!r}")
        if key in params:
            raise OAuthError(f"OAuth parameter {key} given twice")
        params[key] = urllib.parse.unquote(quoted[1:-1])
    return params


def verify(value: str | None, consumer_key: str, token_key: str, token_secret: str, consumer_secret: str = "",
           now: float | None = None, window: int = DEFAULT_WINDOW) -> None:
    """Check one request's header against the credentials; OAuthError naming what is wrong."""
    if not value:
        raise OAuthError("no Authorization header (MAAS metadata needs OAuth)")
    params = parse(value)
    for key in ("oauth_consumer_key", "oauth_token", "oauth_signature_method", "oauth_signature",
                "oauth_timestamp", "oauth_nonce"):
        if key not in params:
            raise OAuthError(f"the OAuth header has no {key}")
    if params["oauth_signature_method"] != "PLAINTEXT":
        raise OAuthError(f"signature method {params['oauth_signature_method']!r} is not PLAINTEXT")
    if params.get("oauth_version", "1.0") != "1.0":
        raise OAuthError(f"OAuth version {params['oauth_version']!r} is not 1.0")
    if not hmac.compare_digest(params["oauth_consumer_key"].encode(), consumer_key.encode()):
        raise OAuthError("unknown consumer key")
    if not hmac.compare_digest(params["oauth_token"].encode(), token_key.encode()):
        raise OAuthError("unknown token")
    expected = plaintext_signature(consumer_secret, token_secret)
    if not hmac.compare_digest(params["oauth_signature"].encode(), expected.encode()):
        raise OAuthError("invalid signature")
    try:
        stamp = int(params["oauth_timestamp"])
    except ValueError:
        raise OAuthError(f"oauth_timestamp {params['oauth_timestamp'][:20]!r} is not a number") from None
    skew = stamp - (time.time() if now is None else now)
    if abs(skew) > window:
        raise OAuthError(f"expired timestamp: {skew:+.0f} s from the server's clock (at most {window} s)")
