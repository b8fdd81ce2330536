"""DER framing of PKCS#7 SignedData, for the signers that serve it (EC2 identity, Azure attested).

``children`` reads the elements of a DER body and ``der`` writes one element. ``SignedTemplate``
signs many documents with one key and certificate at the cost of the signature alone: it takes
one PKCS#7 made by ``cryptography``'s builder (SHA-256, the certificate included, no signed
attributes, so the signature is over the content itself) and keeps every part of it but the
content and the signature; a new document is its content and a new signature put back in that
frame, every enclosing length re-encoded. With an RSA key (PKCS#1 v1.5 signatures are
deterministic) the result is byte for byte what the builder makes (a test compares them); with
an ECDSA key it differs only in the signature.
"""

from __future__ import annotations

from typing import Any, Callable


class DerError(RuntimeError):
    """The builder's output is not the definite-length SignedData this file expects."""


def children(blob: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, start, body start, end) of each DER element in ``blob[start:end]``."""
    found = []
    while start < end:
        tag, first = blob[start], blob[start + 1]
        if first < 0x80:
            body, length = start + 2, first
        else:
            count = first & 0x7F
            if not 1 <= count <= 4:
                raise DerError("PKCS#7 signing: the output is not definite-length DER")
            body, length = start + 2 + count, int.from_bytes(blob[start + 2:start + 2 + count], "big")
        found.append((tag, start, body, body + length))
        start = body + length
    if start != end:
        raise DerError("PKCS#7 signing: malformed output")
    return found


def der(tag: int, body: bytes) -> bytes:
    size = len(body)
    if size < 0x80:
        return bytes((tag, size)) + body
    count = (size.bit_length() + 7) // 8
    return bytes((tag, 0x80 | count)) + size.to_bytes(count, "big") + body


class SignedTemplate:
    """``sign(content)``: PKCS#7 SignedData (DER) of ``content`` with ``key`` and ``certificate``."""

    def __init__(self, key: Any, certificate: Any):
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
        from cryptography.hazmat.primitives.serialization import pkcs7

        if isinstance(key, rsa.RSAPrivateKey):
            pkcs1, sha256 = padding.PKCS1v15(), hashes.SHA256()
            self._signature: Callable[[bytes], bytes] = lambda data: key.sign(data, pkcs1, sha256)
        elif isinstance(key, ec.EllipticCurvePrivateKey):
            ecdsa = ec.ECDSA(hashes.SHA256())
            self._signature = lambda data: key.sign(data, ecdsa)
        else:
            raise DerError(f"PKCS#7 signing: a {type(key).__name__} key is neither RSA nor ECDSA")
        options = [pkcs7.PKCS7Options.Binary, pkcs7.PKCS7Options.NoAttributes]
        sample = (pkcs7.PKCS7SignatureBuilder().set_data(b"{}").add_signer(certificate, key, hashes.SHA256())
                  .sign(serialization.Encoding.DER, options))
        # ContentInfo{oid, [0]{SignedData{version, digestAlgorithms, encapContentInfo{oid, [0]{OCTET
        # STRING content}}, [0] certificates, signerInfos SET{SignerInfo{..., OCTET STRING signature}}}}}
        (outer,) = children(sample, 0, len(sample))
        oid, wrapper = children(sample, outer[2], outer[3])
        (signed_data,) = children(sample, wrapper[2], wrapper[3])
        parts = children(sample, signed_data[2], signed_data[3])
        if len(parts) != 5 or parts[3][0] != 0xA0 or parts[4][0] != 0x31:
            raise DerError("PKCS#7 signing: SignedData is not version, digests, content, certificates, signers")
        encap = children(sample, parts[2][2], parts[2][3])
        (signer,) = children(sample, parts[4][2], parts[4][3])
        fields = children(sample, signer[2], signer[3])
        if fields[-1][0] != 0x04 or any(f[0] in (0xA0, 0xA1) for f in fields):
            raise DerError("PKCS#7 signing: the SignerInfo carries attributes or no signature")
        self._oid = sample[oid[1]:oid[3]]
        self._head = sample[parts[0][1]:parts[1][3]]  # version and digestAlgorithms
        self._content_oid = sample[encap[0][1]:encap[0][3]]
        self._certificates = sample[parts[3][1]:parts[3][3]]
        self._signer_head = sample[fields[0][1]:fields[-2][3]]  # version, sid, digest and signature algorithms

    def sign(self, content: bytes) -> bytes:
        signature = self._signature(content)
        encap = der(0x30, self._content_oid + der(0xA0, der(0x04, content)))
        signers = der(0x31, der(0x30, self._signer_head + der(0x04, signature)))
        body = der(0x30, self._head + encap + self._certificates + signers)
        return der(0x30, self._oid + der(0xA0, body))
