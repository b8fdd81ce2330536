"""Azure's provisioning document ``ovf-env.xml`` (on the provisioning ISO/UDF media), read safely.

The document names the admin user (``UserName``, ``UserPassword``), whether SSH password logins
are allowed (``DisableSshPasswordAuthentication``), the SSH public keys (``SSH/PublicKeys/PublicKey``
with a ``Value``, or only a ``Fingerprint`` and ``Path``), the ``HostName`` and ``CustomData``
(base64 user-data). Parsed with the standard library's parser after refusing any DTD (no
``<!DOCTYPE``, so no entity can be declared or expanded) and anything larger than ``MAX_BYTES``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Optional

from cloudseed.clouds.azure import OVF as NAMES
from cloudseed.clouds.azure import OVF_NAMESPACES

MAX_BYTES = 1024 * 1024
PASSWORD_REDACTED = "REDACTED"  # what the platform writes once the password was handed over


class OvfError(Exception):
    """The document is not a usable ovf-env.xml (too large, a DTD, not XML, not Azure's)."""


@dataclass
class OvfEnv:
    username: Optional[str] = None
    password: Optional[str] = None
    disable_ssh_password_auth: Optional[bool] = None
    public_keys: list = field(default_factory=list)  # [{"fingerprint", "path", "value"}]
    hostname: Optional[str] = None
    custom_data: Optional[bytes] = None
    preprovisioned_vm: bool = False

    @property
    def key_values(self) -> list:
        """The keys given with their value (keys given only by fingerprint cannot be installed here)."""
        return [k["value"] for k in self.public_keys if k.get("value")]


def _text(node, path: str) -> Optional[str]:
    found = node.find(path, OVF_NAMESPACES)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def parse(data: bytes | str) -> OvfEnv:
    """The facts of an ovf-env.xml document; ``OvfError`` when it is refused."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        raise OvfError(f"ovf-env.xml is {len(raw)} bytes; the limit is {MAX_BYTES}")
    lowered = raw.lower()
    if b"<!doctype" in lowered or b"<!entity" in lowered:
        raise OvfError("ovf-env.xml carries a DTD (<!DOCTYPE or <!ENTITY); refused")
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(raw)
    except ET.ParseError as e:
        raise OvfError(f"ovf-env.xml is not XML: {e}") from None
    if root.tag != f"{{{OVF_NAMESPACES['oe']}}}{NAMES['root']}":
        raise OvfError(f"ovf-env.xml's root is {root.tag!r}, not an OVF {NAMES['root']}")
    sets = root.findall(NAMES["linux_set"], OVF_NAMESPACES)
    if len(sets) != 1:
        raise OvfError(f"ovf-env.xml has {len(sets)} LinuxProvisioningConfigurationSet sections; one expected")
    section = sets[0]
    env = OvfEnv(username=_text(section, NAMES["username"]), password=_text(section, NAMES["password"]),
                 hostname=_text(section, NAMES["hostname"]))
    flag = _text(section, NAMES["disable_password_auth"])
    if flag is not None:
        env.disable_ssh_password_auth = flag.lower() == "true"
    for key in section.findall(NAMES["public_keys"], OVF_NAMESPACES):
        env.public_keys.append({"fingerprint": _text(key, NAMES["key_fingerprint"]) or "",
                                "path": _text(key, NAMES["key_path"]) or "",
                                "value": _text(key, NAMES["key_value"]) or ""})
    custom = _text(section, NAMES["custom_data"])
    if custom:
        try:
            env.custom_data = base64.b64decode(custom, validate=False)
        except ValueError as e:
            raise OvfError(f"ovf-env.xml CustomData is not base64: {e}") from None
    pre = _text(root, NAMES["preprovisioned"])
    env.preprovisioned_vm = (pre or "").lower() == "true"
    if not env.username:
        raise OvfError("ovf-env.xml names no UserName")
    return env
