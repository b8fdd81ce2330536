"""The admin password as cloudbase-init and Nova do it: generated, set, posted encrypted, once.

Asked for with ``admin_password: {post_to_metadata: true}`` (read by ``set_passwords``). On the
OpenStack metadata service (the only datasource with Nova's password API), and only when no
password was posted for this instance yet, it:

1. generates a strong password (``length`` letters and digits, 24 by default, from ``secrets``);
2. sets it for the default user (or ``admin_password.user``) through ``chpasswd`` on stdin;
3. encrypts it with the instance's first ``ssh-rsa`` public key (RSA PKCS#1 v1.5, base64), as
   ``nova get-password`` expects (``_rsa_pkcs1.py``);
4. POSTs the ciphertext once to ``<metadata>/openstack/latest/password`` and records that it did
   (a per-instance semaphore), so a later boot never makes a new one.

The password itself is never logged, printed, written to a file, put in the status or in
instance data: it lives in this process's memory until the POST is done. ``cloudseed instances
password ID --key KEY`` decrypts it on the provider side.
"""

from __future__ import annotations

import re
import string

from cloudseed.agent.state import PER_INSTANCE, Semaphores

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from cloudseed.agent.modules import ModuleContext

ALPHABET = string.ascii_letters + string.digits
DEFAULT_LENGTH = 24
POSTED = "admin_password_posted"  # the per-instance semaphore
PASSWORD_PATH = "openstack/latest/password"
_SUBPLATFORM = re.compile(r"^metadata \((https?://[^) ]+)\)$")

SCHEMA = {
    "type": "object",
    "description": "cloudbase-init's and Nova's admin password: generate a password for the default user, "
                   "set it, and post it once to the OpenStack metadata service encrypted with the instance's "
                   "first RSA SSH key (read it with `nova get-password` or `cloudseed instances password`).",
    "properties": {
        "post_to_metadata": {"type": "boolean", "default": False,
                             "description": "Generate, set and post the password (OpenStack metadata service only)."},
        "user": {"type": "string", "description": "The account to set it for (default: the default user)."},
        "length": {"type": "integer", "minimum": 12, "maximum": 64, "default": DEFAULT_LENGTH,
                   "description": "Length of the generated password (letters and digits)."},
    },
    "additionalProperties": False,
}


class AdminPasswordError(Exception):
    """The admin password could not be made or posted; the message never holds the password."""


def generate(length: int = DEFAULT_LENGTH) -> str:
    import secrets

    while True:  # at least one of each kind, as login policies often require
        text = "".join(secrets.choice(ALPHABET) for _ in range(length))
        if any(c.islower() for c in text) and any(c.isupper() for c in text) and any(c.isdigit() for c in text):
            return text


def metadata_url(datasource: object) -> str | None:
    """The metadata service's base URL when ``datasource`` is the OpenStack metadata service."""
    if getattr(datasource, "name", "") != "OpenStack":
        return None
    base = getattr(datasource, "metadata_address", None)  # set by this process's fetch
    if not base:  # a later stage's process: the datasource restored from this boot's record
        found = _SUBPLATFORM.match(getattr(datasource, "subplatform", "") or "")
        base = found.group(1) if found else None
    return base.rstrip("/") if base else None


def first_rsa_key(keys: list[str]) -> str | None:
    return next((k for k in keys if isinstance(k, str) and "ssh-rsa" in k.split()), None)


def settings(cfg: dict) -> dict | None:
    """The ``admin_password`` mapping when it asks for the password; AdminPasswordError on bad input."""
    section = cfg.get("admin_password")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise AdminPasswordError("admin_password: expected a mapping (post_to_metadata, user, length)")
    unknown = sorted(set(section) - set(SCHEMA["properties"]))
    if unknown:
        raise AdminPasswordError(f"admin_password: unknown key {unknown[0]!r} (post_to_metadata, user, length)")
    if not isinstance(section.get("post_to_metadata", False), bool):
        raise AdminPasswordError("admin_password.post_to_metadata: expected true or false")
    length = section.get("length", DEFAULT_LENGTH)
    if isinstance(length, bool) or not isinstance(length, int) or not 12 <= length <= 64:
        raise AdminPasswordError(f"admin_password.length: expected a number from 12 to 64, got {length!r}")
    return section if section.get("post_to_metadata") else None


def post_admin_password(ctx: ModuleContext, default_user: str | None) -> str:
    """Do it (see the module docstring); what was done, for the log. AdminPasswordError on failure."""
    section = settings(ctx.cfg)
    if section is None:
        return "not asked for"
    sems = Semaphores(ctx.paths, ctx.instance_id)
    if sems.has_run(POSTED, PER_INSTANCE):
        return "already posted for this instance"
    ds = ctx.datasource
    base = metadata_url(ds)
    if base is None:
        name = getattr(ds, "name", None) or "none"
        raise AdminPasswordError(f"admin_password.post_to_metadata: the datasource {name} has no password API "
                                 "(only the OpenStack metadata service has one)")
    if (getattr(ds, "extra", None) or {}).get("password"):
        sems.mark(POSTED, PER_INSTANCE)
        return "the metadata service already holds a password for this instance; not changed"
    key = first_rsa_key(list(getattr(ds, "public_keys", None) or []))
    if key is None:
        raise AdminPasswordError("admin_password.post_to_metadata: the instance has no ssh-rsa public key "
                                 "to encrypt the password with")
    user = section.get("user") or default_user
    if not user:
        raise AdminPasswordError("admin_password: there is no default user (set admin_password.user)")
    if not ctx.distro.user_exists(user):
        raise AdminPasswordError(f"admin_password: user {user!r} does not exist")
    from cloudseed.agent.modules._rsa_pkcs1 import KeyFormatError, encrypt_for_ssh_key

    password = generate(section.get("length", DEFAULT_LENGTH))
    try:
        ciphertext = encrypt_for_ssh_key(password.encode("utf-8"), key)
    except (KeyFormatError, ValueError) as e:
        raise AdminPasswordError(f"admin_password: the first ssh-rsa key cannot be used: {e}") from None
    from cloudseed.agent.distros import DistroError

    try:
        ctx.distro.chpasswd([(user, password)], hashed=False)
    except DistroError as e:  # its message names the user and the exit status, never the password
        raise AdminPasswordError(f"admin_password: {e}") from None
    del password
    _post(f"{base}/{PASSWORD_PATH}", ciphertext)
    sems.mark(POSTED, PER_INSTANCE)
    return f"set a generated password for {user} and posted it encrypted to {base}"


def _post(url: str, ciphertext: str) -> None:
    from cloudseed.core.http import FetchError, fetch_response

    try:
        fetch_response(url, method="POST", data=ciphertext.encode("ascii"), timeout=10, retries=2,
                       headers={"Content-Type": "text/plain"})
    except FetchError as e:
        if e.status == 409:
            raise AdminPasswordError(f"admin_password: {url} already holds a password (HTTP 409); the one "
                                     "just set was not posted: an operator must clear the stored one") from None
        raise AdminPasswordError(f"admin_password: posting to {url} failed: {e}") from None
