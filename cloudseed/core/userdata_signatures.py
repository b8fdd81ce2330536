"""Signed user-data: what is signed, and checking a signature with OpenSSH's ``ssh-keygen -Y verify``.

A signature is an SSH signature (``ssh-keygen -Y sign``, the armored ``SSHSIG`` format) in the
namespace ``cloudseed-userdata`` over ``signed_message(kind, instance_id, data)``: a header naming
what the data is (``user-data``, ``vendor-data``) and the instance it is for, then the data as
served. So a signature made for one instance does not verify for another (no replay of one
instance's user-data to the next), and user-data signed as vendor-data is not user-data.
``vendor-data2`` is a config drive's or OpenStack's ``vendor_data2.json`` (the JSON document as
served: its signature does not pass for ``vendor_data.json``). A signature is served and stored at
``signature_url(PATH)``: ``PATH.sig``, beside the data.

Verifying calls the ``ssh-keygen`` of the running machine (every image with OpenSSH has it): no
cryptography library is imported, on the boot path or anywhere here. Signing uses ``ssh-keygen``
too (``cloudseed userdata sign``, any key OpenSSH can use); the metadata server signs in process
(``cloudseed.provider.userdata_signing``), in the same format.
"""

from __future__ import annotations

import os

from cloudseed.core.root import run_on_machine

NAMESPACE = "cloudseed-userdata"
KINDS = ("user-data", "vendor-data", "vendor-data2")
SUFFIX = ".sig"  # a signature is served and stored beside its data: user-data.sig, user_data.sig
MAX_SIGNATURE = 16 * 1024  # an armored SSH signature is well under 1 KiB (RSA-4096: about 1 KiB)
ARMOR_START = "-----BEGIN SSH SIGNATURE-----"


def signature_url(url: str) -> str:
    """Where the signature of the data at ``url`` (a URL or a path) is: ``.sig`` added to its path, the
    query kept (``/compute/userData?format=text`` -> ``/compute/userData.sig?format=text``)."""
    base, sep, query = url.partition("?")
    return base + SUFFIX + sep + query


class SignatureError(Exception):
    """A signature is missing, malformed, or does not verify; the message says which and why."""


def signed_message(kind: str, instance_id: str, data: bytes) -> bytes:
    """The bytes a signature covers: what the data is, for which instance, then the data itself."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if not instance_id or any(c in instance_id for c in "\r\n\0"):
        raise ValueError("the instance-id must be one line of text")
    return f"cloudseed {kind}\ninstance-id: {instance_id}\n\n".encode() + data


def key_line(key: str) -> str:
    """``TYPE BASE64`` of an OpenSSH public key line (options and comment dropped); ValueError if none."""
    fields = str(key).split()
    for i, field in enumerate(fields[:-1]):
        if field.startswith(("ssh-", "ecdsa-", "sk-")) and len(fields[i + 1]) > 16:
            return f"{field} {fields[i + 1]}"
    raise ValueError(f"not an OpenSSH public key: {str(key)[:40]!r}")


def verify(data: bytes, signature: bytes | str, kind: str, instance_id: str, trusted_keys: list[str],
           timeout: float = 20.0) -> str:
    """Check ``signature`` over ``data`` for ``instance_id`` against ``trusted_keys``; returns the key
    that signed (``TYPE BASE64``). SignatureError says why not (the reason as ``ssh-keygen`` gives it)."""
    text = signature.decode("ascii", "replace") if isinstance(signature, bytes) else str(signature)
    if len(text) > MAX_SIGNATURE or ARMOR_START not in text:
        raise SignatureError("not an SSH signature (ssh-keygen -Y sign)")
    keys = []
    for key in trusted_keys:
        try:
            keys.append(key_line(key))
        except ValueError as e:
            raise SignatureError(f"trusted_userdata_keys: {e}") from None
    if not keys:
        raise SignatureError("no trusted_userdata_keys to check it against")
    try:
        message = signed_message(kind, instance_id, data)
    except ValueError as e:
        raise SignatureError(str(e)) from None
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cloudseed-sig-") as work:
        allowed, sig = os.path.join(work, "allowed_signers"), os.path.join(work, "data.sig")
        with open(allowed, "w", encoding="ascii") as handle:
            handle.writelines(f'cloudseed namespaces="{NAMESPACE}" {key}\n' for key in keys)
        with open(sig, "w", encoding="ascii") as handle:
            handle.write(text)
        proc = run_on_machine(["ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "cloudseed", "-n", NAMESPACE,
                               "-s", sig], input=message, timeout=timeout)
    if proc.returncode == 0:
        signer = _signer(proc.stdout, keys)
        return signer
    if proc.returncode == 127:
        raise SignatureError("ssh-keygen is not installed here, so no signature can be checked")
    detail = (proc.stderr or proc.stdout).strip().splitlines()
    reason = detail[-1] if detail else f"ssh-keygen exited {proc.returncode}"
    made_by = signing_key_fingerprint(text)
    if made_by and made_by not in {_fingerprint(key) for key in keys}:  # ssh-keygen only says it could not
        reason = f"signed by {made_by}, a key not in trusted_userdata_keys"
    raise SignatureError(f"does not verify against trusted_userdata_keys for instance {instance_id!r} "
                         f"({reason})")


def signing_key_fingerprint(armored: str) -> str:
    """The SHA256 fingerprint of the public key an armored SSH signature names ('' when unreadable)."""
    import base64
    import hashlib
    import struct

    body = "".join(line.strip() for line in armored.splitlines() if line.strip() and not line.startswith("-----"))
    try:
        blob = base64.b64decode(body)
        if blob[:6] != b"SSHSIG":
            return ""
        (length,) = struct.unpack(">I", blob[10:14])  # after the magic and the version
        key = blob[14:14 + length]
    except (ValueError, struct.error):
        return ""
    if not key:
        return ""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key).digest()).decode("ascii").rstrip("=")


def _signer(output: str, keys: list[str]) -> str:
    """The trusted key whose fingerprint ``ssh-keygen`` names (the first key when it names none)."""
    for key in keys:
        fingerprint = _fingerprint(key)
        if fingerprint and fingerprint in output:
            return key
    return keys[0]


def _fingerprint(key: str) -> str:
    import base64
    import hashlib

    try:
        blob = base64.b64decode(key.split()[1])
    except (IndexError, ValueError):
        return ""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


def sign_with_ssh_keygen(key_file: str, kind: str, instance_id: str, data: bytes, timeout: float = 60.0) -> str:
    """The armored signature ``ssh-keygen -Y sign -f KEY_FILE`` makes (a private key, or a public key
    whose private half ssh-agent holds); SignatureError with ssh-keygen's reason when it cannot."""
    message = signed_message(kind, instance_id, data)
    proc = run_on_machine(["ssh-keygen", "-q", "-Y", "sign", "-f", key_file, "-n", NAMESPACE], input=message,
                          timeout=timeout)
    if proc.returncode != 0 or ARMOR_START not in proc.stdout:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise SignatureError(f"ssh-keygen -Y sign with {key_file}: " + (detail[-1] if detail else
                                                                         f"exited {proc.returncode}"))
    return proc.stdout
