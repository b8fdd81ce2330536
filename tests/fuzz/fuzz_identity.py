"""Coverage-guided fuzzing (atheris) of the metadata server's identity checks: IMDSv2 tokens and
the proxy's ``X-Instance-ID`` signature.

    .venv/bin/python tests/fuzz/fuzz_identity.py TARGET -runs=20000 DIR          # short run (test)
    .venv/bin/python tests/fuzz/fuzz_identity.py TARGET -max_total_time=600 DIR  # long run

TARGET is ``token`` (a token and an instance id as a client may send them: the check raises
nothing but TokenError with status 401, and accepts only a token issued to that instance and
unexpired) or ``signature`` (an X-Instance-ID and signature pair: only the pair whose signature is
the HMAC of that id under the proxy secret is accepted; everything else is a 403).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
import types

import atheris

# run as a script under atheris, not by pytest: this checkout first, even from a Python without it installed
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

with atheris.instrument_imports():
    from cloudseed.provider.server.imds_tokens import TokenError, TokenIssuer
    from cloudseed.provider.server.metadata_app import MetadataApp

KEY = b"fuzzing-key-0123456789abcdef"
SECRET = b"proxy-secret-for-fuzzing"
NOW = 1_800_000_000.0
ISSUER = TokenIssuer(KEY, clock=lambda: NOW)
GOOD = {ISSUER.issue("i-1", 21600): "i-1", ISSUER.issue("i-2", 60): "i-2"}


def _header(fdp, length: int) -> str:
    """A header value as the server's parser hands it over (bytes read as latin-1)."""
    return fdp.ConsumeBytes(length).decode("latin-1")


def token(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    instance = "i-1" if fdp.ConsumeBool() else _header(fdp, 12)
    if fdp.ConsumeBool() and GOOD:
        base = list(GOOD)[fdp.ConsumeIntInRange(0, len(GOOD) - 1)]
        cut = fdp.ConsumeIntInRange(0, len(base))
        candidate = base[:cut] + _header(fdp, 8) + base[cut + 1:]
    else:
        candidate = _header(fdp, 120)
    try:
        ISSUER.check(candidate, instance)
    except TokenError as error:
        assert error.status == 401, error.status
        return
    # accepted: it must be one of the issued tokens (whitespace around it aside), for its owner
    assert GOOD.get(candidate.strip()) == instance, (candidate, instance)


def signature(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    instance = _header(fdp, 24)
    right = hmac.new(SECRET, instance.strip().encode(), hashlib.sha256).hexdigest()
    given = right.upper() if fdp.ConsumeBool() else _header(fdp, 80)
    request = types.SimpleNamespace(headers={"x-instance-id": instance, "x-instance-id-signature": given})
    app = types.SimpleNamespace(proxy_secret=SECRET)
    found = MetadataApp._signed_instance_id(app, request)
    if isinstance(found, str):
        assert instance.strip() and hmac.compare_digest(given.strip().lower().encode(), right.encode())
        assert found == instance.strip()
    else:
        assert found.status == 403, found.status


TARGETS = {"token": token, "signature": signature}


def main() -> None:
    target = TARGETS[sys.argv.pop(1)]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
