"""The registry's key for signed user-data, and signing in process in OpenSSH's ``SSHSIG`` format.

One Ed25519 key per registry, made the first time it is needed and kept in the registry's settings
(``userdata_signing_key``, OpenSSH private key text), so every metadata server of the registry and
``cloudseed seed build`` sign with the same key; its public half (``cloudseed userdata key``) goes
into images' ``trusted_userdata_keys``. Signatures are what ``ssh-keygen -Y sign -n
cloudseed-userdata`` makes (armored SSHSIG, SHA-512 of the message), over
``cloudseed.core.userdata_signatures.signed_message``; made here with ``cryptography`` so the server
starts no process per instance, and checked in the tests by ``ssh-keygen -Y verify``.
Provider side only.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from typing import Any

from cloudseed.core.userdata_signatures import NAMESPACE, signed_message

SETTING = "userdata_signing_key"
# OpenStack's and config drives' JSON vendor data documents: signed as served, as this kind
JSON_VENDOR_DATA = {"vendor_data.json": "vendor-data", "vendor_data2.json": "vendor-data2"}
# every API's vendor data documents the guest unwraps, by the last part of their path: (API, name) -> kind
VENDOR_DOCUMENTS = {**{("openstack", name): kind for name, kind in JSON_VENDOR_DATA.items()},
                    ("maas", "vendor-data"): "vendor-data"}  # MAAS's meta-data/vendor-data YAML
KEY_COMMENT = "cloudseed registry user-data key"


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def make_key() -> str:
    """A new Ed25519 private key as OpenSSH private key text."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption()).decode("ascii")


class UserDataSigner:
    """A loaded Ed25519 key: ``public_key`` (an OpenSSH public key line) and ``sign``."""

    def __init__(self, private_text: str):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        key = serialization.load_ssh_private_key(private_text.encode("ascii"), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{SETTING}: not an Ed25519 key")
        self._key = key
        raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self._public_blob = _string(b"ssh-ed25519") + _string(raw)
        self.public_key = f"ssh-ed25519 {base64.b64encode(self._public_blob).decode('ascii')} {KEY_COMMENT}"

    def sign(self, kind: str, instance_id: str, data: bytes) -> str:
        """The armored SSH signature of ``data`` as ``kind`` for ``instance_id``."""
        digest = hashlib.sha512(signed_message(kind, instance_id, data)).digest()
        namespace = NAMESPACE.encode("ascii")
        to_sign = b"SSHSIG" + _string(namespace) + _string(b"") + _string(b"sha512") + _string(digest)
        signature = _string(b"ssh-ed25519") + _string(self._key.sign(to_sign))
        blob = (b"SSHSIG" + struct.pack(">I", 1) + _string(self._public_blob) + _string(namespace) + _string(b"")
                + _string(b"sha512") + _string(signature))
        encoded = base64.b64encode(blob).decode("ascii")
        lines = [encoded[i:i + 70] for i in range(0, len(encoded), 70)]
        return "-----BEGIN SSH SIGNATURE-----\n" + "\n".join(lines) + "\n-----END SSH SIGNATURE-----\n"


def shared_signer(registry: Any) -> UserDataSigner:
    """The registry's signer, its key made on first use and shared by every server of the registry."""
    return UserDataSigner(registry.shared_setting(SETTING, make_key))


def guest_instance_id(api: str, record: Any) -> str:
    """The instance-id the guest of metadata API ``api`` reads, which the signatures served there
    cover: what ``provider/instance_data/<api>.py`` declares as ``guest_instance_id(record)`` (GCE's
    number, Azure's vmId, DigitalOcean's droplet id...), else the record's own id (EC2, OpenStack,
    NoCloud, seeds)."""
    derive = _DERIVED_IDS.get(api, False)
    if derive is False:
        import importlib
        import importlib.util

        name = f"cloudseed.provider.instance_data.{api}"
        found = api.isidentifier() and importlib.util.find_spec(name) is not None
        derive = _DERIVED_IDS[api] = getattr(importlib.import_module(name), "guest_instance_id", None) if found \
            else None
    return str(derive(record)) if derive is not None else record.instance_id


_DERIVED_IDS: dict[str, Any] = {}  # API -> its guest_instance_id (None: the record's id), looked up once


def vendor_data_bytes(vendor_data: Any) -> bytes | None:
    """The vendor-data a guest receives as it is, when the record holds it as text (None otherwise:
    a JSON structure reaches each cloud's agent in that cloud's own form, so it is not signed)."""
    if isinstance(vendor_data, str) and vendor_data:
        return vendor_data.encode("utf-8")
    return None
