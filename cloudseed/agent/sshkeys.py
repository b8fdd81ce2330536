"""SSH public keys: parsing and checking key lines, fingerprints, and installing authorized_keys.

A key line is ``[options] type base64 [comment]``. A line is accepted only when its type is a
known SSH key type and its base64 blob decodes and names that same type, so a truncated or
mangled key is reported (with the config key it came from) instead of being installed.
``authorized_keys`` files are merged: existing lines are kept, a key already present is updated
in place (options/comment), new keys are appended; the file is 0600 and owned by the user.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass

from cloudseed.core.root import TargetRoot

KEY_TYPES = (
    "ssh-rsa", "ssh-dss", "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
    "sk-ecdsa-sha2-nistp256@openssh.com", "sk-ssh-ed25519@openssh.com", "ssh-xmss@openssh.com",
    "ssh-rsa-cert-v01@openssh.com", "ssh-dss-cert-v01@openssh.com", "ssh-ed25519-cert-v01@openssh.com",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com", "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com", "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "sk-ssh-ed25519-cert-v01@openssh.com", "ssh-xmss-cert-v01@openssh.com",
)

# The options put before root's keys with disable_root (cloud-init's documented default).
DISABLE_ROOT_OPTS = (
    "no-port-forwarding,no-agent-forwarding,no-X11-forwarding,"
    "command=\"echo 'Please login as the user \\\"$USER\\\" rather than the user \\\"$DISABLE_USER\\\".';"
    "echo;sleep 10;exit 142\""
)


class SshKeyError(ValueError):
    """Not a usable SSH public key line."""


@dataclass
class KeyLine:
    keytype: str
    blob: str
    comment: str = ""
    options: str = ""

    def __str__(self) -> str:
        return " ".join(part for part in (self.options, self.keytype, self.blob, self.comment) if part)


def _split_options(text: str) -> tuple[str, str]:
    """(options, rest) of a line starting with an options field (quotes may hold spaces)."""
    quoted = False
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            index += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char in " \t" and not quoted:
            break
        index += 1
    return text[:index], text[index:].lstrip()


# plain key types: number of length-prefixed fields in the blob (the type name included)
_FIELD_COUNTS = {"ssh-rsa": 3, "ssh-dss": 5, "ssh-ed25519": 2, "ecdsa-sha2-nistp256": 3, "ecdsa-sha2-nistp384": 3,
                 "ecdsa-sha2-nistp521": 3, "sk-ecdsa-sha2-nistp256@openssh.com": 4,
                 "sk-ssh-ed25519@openssh.com": 3}


def _blob_type(blob: str) -> str:
    """The key type named inside the blob, after checking the blob's structure."""
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        raise SshKeyError("the key data is not valid base64") from None
    fields: list[bytes] = []
    offset = 0
    while offset < len(raw):
        if offset + 4 > len(raw):
            raise SshKeyError("the key data is truncated")
        (length,) = struct.unpack(">I", raw[offset:offset + 4])
        if offset + 4 + length > len(raw):
            if fields and fields[0].decode("ascii", "replace").endswith("-cert-v01@openssh.com"):
                break  # certificates also hold fixed-size integers; the type name was enough
            raise SshKeyError("the key data is truncated")
        fields.append(raw[offset + 4:offset + 4 + length])
        offset += 4 + length
    if not fields or not fields[0]:
        raise SshKeyError("the key data is empty")
    keytype = fields[0].decode("ascii", errors="replace")
    expected = _FIELD_COUNTS.get(keytype)
    if expected is not None and len(fields) != expected:
        raise SshKeyError(f"the key data is truncated or corrupt ({len(fields)} of {expected} parts)")
    if keytype == "ssh-ed25519" and len(fields[1]) != 32:
        raise SshKeyError("the ed25519 key is not 32 bytes")
    return keytype


def parse_key(line: str, options: str | None = None) -> KeyLine:
    """A checked key line; SshKeyError saying what is wrong."""
    text = str(line).strip()
    if not text or text.startswith("#"):
        raise SshKeyError("empty line")
    if "\n" in text or "\r" in text:
        raise SshKeyError("a key must be on a single line")
    fields = text.split(None, 2)
    found_options = ""
    if fields[0] not in KEY_TYPES:
        found_options, rest = _split_options(text)
        fields = rest.split(None, 2)
        if not fields or fields[0] not in KEY_TYPES:
            raise SshKeyError(f"unknown key type {(fields[0] if fields else text)[:40]!r}")
    if len(fields) < 2:
        raise SshKeyError("no key data after the key type")
    keytype, blob = fields[0], fields[1]
    inner = _blob_type(blob)
    if inner != keytype:
        raise SshKeyError(f"the key data is a {inner!r} key, not {keytype!r}")
    comment = fields[2].strip() if len(fields) > 2 else ""
    return KeyLine(keytype, blob, comment, found_options if options is None else options)


def fingerprint(blob: str, method: str = "sha256") -> str:
    """``SHA256:base64`` (OpenSSH's format) or colon-separated hex for other hashes (md5...)."""
    raw = base64.b64decode(blob)
    if method.lower() == "sha256":
        return "SHA256:" + base64.b64encode(hashlib.sha256(raw).digest()).decode().rstrip("=")
    digest = hashlib.new(method.lower(), raw).hexdigest()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def key_bits(keytype: str, blob: str) -> int:
    """The key size as ``ssh-keygen -l`` shows it."""
    if "ed25519" in keytype:
        return 256
    for curve, bits in (("nistp256", 256), ("nistp384", 384), ("nistp521", 521)):
        if curve in keytype:
            return bits
    raw = base64.b64decode(blob)
    fields, offset = [], 0
    while offset + 4 <= len(raw) and len(fields) < 3:
        (length,) = struct.unpack(">I", raw[offset:offset + 4])
        fields.append(raw[offset + 4:offset + 4 + length])
        offset += 4 + length
    if keytype == "ssh-rsa" and len(fields) == 3:
        return int.from_bytes(fields[2], "big").bit_length()
    if keytype == "ssh-dss" and len(fields) >= 2:
        return int.from_bytes(fields[1], "big").bit_length()
    return 0


# ---------------------------------------------------------------------- authorized_keys
def merge_authorized_keys(existing: str, keys: list[KeyLine]) -> str:
    """``existing`` file text with ``keys`` merged in (same blob: replaced in place)."""
    lines = existing.splitlines()
    pending = list(keys)
    out = []
    for line in lines:
        try:
            current = parse_key(line)
        except SshKeyError:
            out.append(line)
            continue
        replacement = next((k for k in pending if k.blob == current.blob), None)
        if replacement is not None:
            pending = [k for k in pending if k.blob != current.blob]
            out.append(str(replacement))
        else:
            out.append(line)
    seen = set()
    for key in pending:
        if key.blob not in seen:
            out.append(str(key))
            seen.add(key.blob)
    return "\n".join(out) + "\n"


def authorized_keys_path(root: TargetRoot, user: str, home: str) -> str:
    """The first ``AuthorizedKeysFile`` of the target's sshd_config for ``user`` (default ~/.ssh)."""
    value = "%h/.ssh/authorized_keys"
    for line in root.read_text("/etc/ssh/sshd_config", default="").splitlines():
        fields = line.strip().split(None, 1)
        if len(fields) == 2 and fields[0].lower() == "authorizedkeysfile":
            value = fields[1]
            break
        if fields and fields[0].lower() == "match":
            break
    first = value.split()[0]
    path = first.replace("%h", home).replace("%u", user).replace("%%", "%")
    return path if path.startswith("/") else f"{home.rstrip('/')}/{path}"


def install_authorized_keys(root: TargetRoot, user: str, keys: list[KeyLine]) -> str:
    """Merge ``keys`` into ``user``'s authorized_keys; returns the path (inside the root)."""
    entry = root.user_entry(user)
    if entry is None or len(entry) < 6:
        raise SshKeyError(f"user {user!r} does not exist")
    uid, gid, home = int(entry[2]), int(entry[3]), entry[5] or "/"
    path = authorized_keys_path(root, user, home)
    directory = path.rsplit("/", 1)[0] or "/"
    if directory.startswith(home.rstrip("/") + "/"):
        root.makedirs(directory, mode=0o700, owner=uid, group=gid)
    else:
        root.makedirs(directory, mode=0o755)
    if root.islink(path):
        raise SshKeyError(f"{path} is a symbolic link; not writing through it")
    current = root.read_text(path, default="")
    root.write(path, merge_authorized_keys(current, keys), mode=0o600, owner=uid, group=gid)
    return path


def read_authorized_keys(root: TargetRoot, user: str) -> tuple[str, list[KeyLine]]:
    entry = root.user_entry(user)
    if entry is None or len(entry) < 6:
        return "", []
    path = authorized_keys_path(root, user, entry[5] or "/")
    keys = []
    for line in root.read_text(path, default="").splitlines():
        try:
            keys.append(parse_key(line))
        except SshKeyError:
            continue
    return path, keys
