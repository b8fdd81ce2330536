"""OpenPGP public keys for apt sources: dearmour, check, fingerprint and fetch from a keyserver.

apt reads binary keyring files (``/etc/apt/keyrings/NAME.gpg``) named by a source's
``signed-by``. A key given in cloud-config is armoured text (``-----BEGIN PGP PUBLIC KEY
BLOCK-----``), binary (YAML ``!!binary``) or base64 without the armour lines; all become the
binary packet stream here, in Python, so the target needs no gpg. The armour checksum (CRC-24)
is checked, the packet stream must parse and start with a public key, and a private key is
refused. A key fetched by id from an HKP keyserver (``/pks/lookup?op=get``) is kept only when
its fingerprint matches the id asked for: a keyserver cannot slip in another key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_KEYSERVER = "keyserver.ubuntu.com"
FETCH_TIMEOUT = 10.0
FETCH_DEADLINE = 30.0
MAX_KEY_BYTES = 4 * 1024 * 1024

_ARMOUR = re.compile(r"-----BEGIN PGP ([A-Z ]+)-----(.*?)-----END PGP \1-----", re.DOTALL)
_TAG_PUBLIC_KEY, _TAG_PUBLIC_SUBKEY, _TAG_SECRET_KEY, _TAG_SECRET_SUBKEY = 6, 14, 5, 7


class KeyError_(Exception):
    """A key is not a usable OpenPGP public key (the message says why, never the key)."""


def crc24(data: bytes) -> int:
    """The armour checksum of RFC 4880 section 6.1."""
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def dearmour(text: str) -> bytes:
    """The binary packets of every armoured block in ``text`` (checksums checked)."""
    blocks = _ARMOUR.findall(text)
    if not blocks:
        raise KeyError_("no '-----BEGIN PGP PUBLIC KEY BLOCK-----' armour found")
    out = b""
    for kind, body in blocks:
        if "PRIVATE" in kind or "SECRET" in kind:
            raise KeyError_("this is a private key; apt needs the public key only")
        if kind != "PUBLIC KEY BLOCK":
            raise KeyError_(f"armour holds a 'PGP {kind}', not a public key block")
        out += _armour_body(body)
    return out


def _armour_body(body: str) -> bytes:
    data_lines: list[str] = []
    for line in (raw.strip() for raw in body.splitlines()):
        if not line or (not data_lines and ":" in line):  # armour headers ("Comment: ...") come first
            continue
        data_lines.append(line)
    checksum = None
    if data_lines and data_lines[-1].startswith("=") and len(data_lines[-1]) == 5:
        checksum = data_lines.pop()[1:]
    try:
        data = base64.b64decode("".join(data_lines), validate=True)
    except (binascii.Error, ValueError):
        raise KeyError_("the armoured key is not valid base64 (a line was changed or cut)") from None
    if checksum is not None:
        try:
            expected = int.from_bytes(base64.b64decode(checksum, validate=True), "big")
        except (binascii.Error, ValueError):
            raise KeyError_("the armour checksum line is not base64") from None
        if crc24(data) != expected:
            raise KeyError_("the armour checksum does not match: the key was altered or truncated")
    return data


class PublicKey:
    """One transferable public key: its packets, and the fingerprints of the key and subkeys."""

    def __init__(self) -> None:
        self.packets: list[bytes] = []  # each packet with its header, as read
        self.fingerprints: list[str] = []  # primary first, upper-case hex
        self.versions: list[int] = []
        self.user_ids: list[str] = []

    @property
    def fingerprint(self) -> str:
        return self.fingerprints[0]

    def matches(self, keyid: str) -> bool:
        """True when ``keyid`` (short, long id or fingerprint) names this key or one of its subkeys."""
        for fpr, version in zip(self.fingerprints, self.versions):
            if fpr == keyid:
                return True
            key_id = fpr[-16:] if version == 4 else fpr[:16]
            if keyid in (key_id, key_id[-8:]):
                return True
        return False

    def to_bytes(self) -> bytes:
        return b"".join(self.packets)


def _packets(data: bytes):
    """(tag, body, whole packet) for each packet of a binary OpenPGP stream."""
    pos = 0
    while pos < len(data):
        start = pos
        head = data[pos]
        if not head & 0x80:
            raise KeyError_(f"not OpenPGP data (bad packet header at byte {pos})")
        pos += 1
        if head & 0x40:  # new format
            tag = head & 0x3F
            if pos >= len(data):
                raise KeyError_("truncated packet header")
            first = data[pos]
            if first < 192:
                length, pos = first, pos + 1
            elif first < 224:
                if pos + 1 >= len(data):
                    raise KeyError_("truncated packet header")
                length, pos = ((first - 192) << 8) + data[pos + 1] + 192, pos + 2
            elif first == 255:
                length, pos = int.from_bytes(data[pos + 1:pos + 5], "big"), pos + 5
            else:
                raise KeyError_("partial-length packets are not allowed in a key")
        else:
            tag = (head >> 2) & 0x0F
            size = {0: 1, 1: 2, 2: 4}.get(head & 3)
            if size is None:
                length = len(data) - pos
            else:
                length, pos = int.from_bytes(data[pos:pos + size], "big"), pos + size
        end = pos + length
        if end > len(data):
            raise KeyError_("the key is truncated (a packet runs past the end)")
        yield tag, data[pos:end], data[start:end]
        pos = end


def _fingerprint(body: bytes) -> tuple[str, int]:
    if not body:
        raise KeyError_("empty public key packet")
    version = body[0]
    if version == 4:
        digest = hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest()
    elif version == 5:
        digest = hashlib.sha256(b"\x9a" + len(body).to_bytes(4, "big") + body).hexdigest()
    elif version == 6:
        digest = hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest()
    else:
        raise KeyError_(f"OpenPGP key version {version} is not supported")
    return digest.upper(), version


def parse_keys(data: bytes) -> list[PublicKey]:
    """The transferable public keys of a binary keyring; KeyError_ when it is not one."""
    keys: list[PublicKey] = []
    for tag, body, whole in _packets(data):
        if tag in (_TAG_SECRET_KEY, _TAG_SECRET_SUBKEY):
            raise KeyError_("this is a private key; apt needs the public key only")
        if tag == _TAG_PUBLIC_KEY:
            keys.append(PublicKey())
        elif not keys:
            raise KeyError_(f"does not start with a public key packet (found packet type {tag})")
        key = keys[-1]
        key.packets.append(whole)
        if tag in (_TAG_PUBLIC_KEY, _TAG_PUBLIC_SUBKEY):
            fpr, version = _fingerprint(body)
            key.fingerprints.append(fpr)
            key.versions.append(version)
        elif tag == 13:
            key.user_ids.append(body.decode("utf-8", errors="replace"))
    if not keys:
        raise KeyError_("no public key in it")
    return keys


def load_key(value: Any) -> bytes:
    """A key as cloud-config gives it (armoured, binary, or base64 of binary) as a binary keyring."""
    if isinstance(value, bytes):
        data = value
    else:
        text = str(value).strip()
        if "-----BEGIN PGP" in text:
            data = dearmour(text)
        else:
            try:
                data = base64.b64decode("".join(text.split()), validate=True)
            except (binascii.Error, ValueError):
                raise KeyError_("neither an armoured key (-----BEGIN PGP PUBLIC KEY BLOCK-----) "
                                "nor base64 of a binary key") from None
    if not data:
        raise KeyError_("the key is empty")
    parse_keys(data)
    return data


def normal_keyid(keyid: str) -> str:
    """``'B59D 5F15 97A5 04B7 ...'`` or ``0x...`` as upper-case hex; KeyError_ when it is not an id."""
    text = re.sub(r"\s+", "", str(keyid)).upper()
    if text.startswith("0X"):
        text = text[2:]
    if not re.fullmatch(r"[0-9A-F]+", text) or len(text) not in (8, 16, 32, 40, 64):
        raise KeyError_(f"{keyid!r} is not a key id or fingerprint (8, 16, 40 or 64 hex digits)")
    return text


def keyserver_url(keyserver: str) -> str:
    """The HTTP(S) base URL of an HKP keyserver given as cloud-init users write it."""
    text = str(keyserver or DEFAULT_KEYSERVER).strip().rstrip("/")
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "hkps", text  # a bare name: HKP over TLS
    scheme = scheme.lower()
    if scheme not in ("hkp", "hkps", "http", "https"):
        raise KeyError_(f"keyserver {keyserver!r}: unsupported scheme {scheme!r} (hkp, hkps, http, https)")
    host, slash, path = rest.partition("/")
    if scheme == "hkp" and not re.search(r":\d+$", host):
        host += ":11371"
    web = {"hkp": "http", "hkps": "https"}.get(scheme, scheme)
    return f"{web}://{host}{slash}{path}".rstrip("/")


def fetch_key(keyid: str, keyserver: str | None = None, timeout: float | None = None,
              deadline: float | None = None) -> bytes:
    """Fetch key ``keyid`` from an HKP keyserver within ``deadline`` seconds (retries included);
    only the key(s) whose fingerprint matches are kept."""
    from cloudseed.core import http

    timeout = FETCH_TIMEOUT if timeout is None else timeout
    deadline = FETCH_DEADLINE if deadline is None else deadline
    wanted = normal_keyid(keyid)
    url = f"{keyserver_url(keyserver or DEFAULT_KEYSERVER)}/pks/lookup?op=get&options=mr&search=0x{wanted}"
    try:
        body = http.fetch(url, timeout=timeout, retries=2, max_wait=deadline, max_bytes=MAX_KEY_BYTES)
    except http.FetchError as e:
        raise KeyError_(f"fetching key {wanted} from the keyserver failed: {e}") from None
    text = body.decode("utf-8", errors="replace")
    if "-----BEGIN PGP" not in text:
        raise KeyError_(f"the keyserver's answer for {wanted} holds no armoured key")
    found = [key for key in parse_keys(dearmour(text)) if key.matches(wanted)]
    if not found:
        raise KeyError_(f"the keyserver answered with a key whose fingerprint does not match {wanted}")
    return b"".join(key.to_bytes() for key in found)
