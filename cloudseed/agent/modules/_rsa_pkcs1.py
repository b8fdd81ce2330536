"""RSA encryption with PKCS#1 v1.5 padding (RFC 8017, 7.2.1) to an OpenSSH ``ssh-rsa`` public key.

What Nova's password API expects: the guest encrypts its generated password with the instance's
RSA SSH key and posts the base64 of the ciphertext; ``nova get-password`` (``openssl`` with the
private key) decrypts it. The standard library is enough: the public key's ``e`` and ``n`` come
from the key blob (RFC 4253, 6.6), the padding is ``00 02 PS 00 M`` with ``PS`` random non-zero
bytes, and the ciphertext is ``pow(m, e, n)`` as ``k`` bytes, so the agent needs no crypto library.
Only encryption is here: the guest never holds a private key.
"""

from __future__ import annotations

import base64
import binascii
import os

MIN_BITS = 1024  # smaller moduli are refused: breakable, and too small for a padded password


class KeyFormatError(ValueError):
    """Not a usable OpenSSH RSA public key; the message says why."""


def parse_ssh_rsa(line: str) -> tuple[int, int]:
    """(e, n) of an ``ssh-rsa AAAA... comment`` line; KeyFormatError names what is wrong."""
    words = line.split()
    if "ssh-rsa" not in words:
        raise KeyFormatError("not an ssh-rsa key")
    kind_at = words.index("ssh-rsa")  # authorized_keys options may come first
    if kind_at + 1 >= len(words):
        raise KeyFormatError("ssh-rsa key without its base64 blob")
    try:
        blob = base64.b64decode(words[kind_at + 1], validate=True)
    except (binascii.Error, ValueError):
        raise KeyFormatError("the key blob is not base64") from None
    fields = []
    at = 0
    while at < len(blob) and len(fields) < 3:
        if at + 4 > len(blob):
            raise KeyFormatError("the key blob is truncated")
        size = int.from_bytes(blob[at:at + 4], "big")
        at += 4
        if at + size > len(blob):
            raise KeyFormatError("the key blob is truncated")
        fields.append(blob[at:at + size])
        at += size
    if len(fields) != 3 or fields[0] != b"ssh-rsa":
        raise KeyFormatError("the key blob is not an ssh-rsa key")
    e = int.from_bytes(fields[1], "big")
    n = int.from_bytes(fields[2], "big")
    if n.bit_length() < MIN_BITS:
        raise KeyFormatError(f"the RSA key has {n.bit_length()} bits; at least {MIN_BITS} are needed")
    if e < 3 or e % 2 == 0:
        raise KeyFormatError(f"the RSA public exponent {e} is not valid")
    return e, n


def _nonzero_random(length: int) -> bytes:
    out = bytearray()
    while len(out) < length:
        out.extend(b for b in os.urandom(length - len(out) + 16) if b)
    return bytes(out[:length])


def encrypt(message: bytes, e: int, n: int) -> bytes:
    """RSAES-PKCS1-v1_5-ENCRYPT: the ``k``-byte ciphertext of ``message`` (at most k - 11 bytes)."""
    k = (n.bit_length() + 7) // 8
    if len(message) > k - 11:
        raise ValueError(f"message too long for a {k * 8}-bit key: {len(message)} bytes, at most {k - 11}")
    padded = b"\x00\x02" + _nonzero_random(k - len(message) - 3) + b"\x00" + message
    return pow(int.from_bytes(padded, "big"), e, n).to_bytes(k, "big")


def encrypt_for_ssh_key(message: bytes, key_line: str) -> str:
    """The base64 text of ``message`` encrypted to ``key_line`` (what Nova's password API stores)."""
    e, n = parse_ssh_rsa(key_line)
    return base64.b64encode(encrypt(message, e, n)).decode("ascii")
