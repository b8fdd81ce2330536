"""Signed user-data on the guest: check the datasource's user-data and vendor-data against the image's keys.

Settings, from the image's configuration only (user-data cannot loosen them):
- ``trusted_userdata_keys``: OpenSSH public keys (the metadata registry's, ``cloudseed userdata key``,
  or a user's own, ``cloudseed userdata sign``);
- ``require_signed_userdata: true``: user-data or vendor-data without a valid signature for this
  instance is not applied (the boot goes on with the image's configuration and says why in the
  status: fail closed).

A datasource that found a signature beside the data puts it in ``ds.extra["signatures"]``
(``{"user-data": TEXT, "vendor-data": TEXT}``). A signature that does not verify (another key,
changed data, another instance's) is an error and that data is not applied, required or not; a
missing signature is only a note in the log unless signatures are required. Verifying runs
``ssh-keygen -Y verify`` (``cloudseed.core.userdata_signatures``): nothing is imported for it, and
nothing at all happens when neither setting is there.
"""

from __future__ import annotations

import logging

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.userdata")

KEYS_SETTING = "trusted_userdata_keys"
REQUIRE_SETTING = "require_signed_userdata"
# the datasource attribute holding each blob, and the signature that covers it
BLOBS = (("user-data", "userdata_raw", "user-data"), ("vendor-data", "vendordata_raw", "vendor-data"),
         ("vendor-data2", "vendordata2_raw", None))


def check(system_cfg: dict, ds: Any, errors: list[str]) -> None:
    """Drop (set to None) each blob of ``ds`` that may not be applied, recording why in ``errors``
    (and in the log and on the console)."""
    found: list[str] = []
    _check(system_cfg, ds, found)
    for message in found:
        LOG.error("%s", message)
    errors.extend(found)


def _check(system_cfg: dict, ds: Any, errors: list[str]) -> None:
    keys = system_cfg.get(KEYS_SETTING)
    require = system_cfg.get(REQUIRE_SETTING)
    if not keys and not require:
        return
    from cloudseed.core.values import as_bool, get_list

    require = as_bool(require)
    keys = [str(k) for k in get_list(system_cfg, KEYS_SETTING)]
    signatures = ds.extra.get("signatures") if isinstance(ds.extra.get("signatures"), dict) else {}
    for name, attribute, kind in BLOBS:
        blob = getattr(ds, attribute, None)
        if not blob:
            continue
        signature = signatures.get(kind) if kind else None
        if not signature:
            if require:
                setattr(ds, attribute, None)
                errors.append(f"{name} not applied: it is not signed and {REQUIRE_SETTING} is set "
                              f"(datasource {ds.name} gave no signature)")
            else:
                LOG.info("%s is not signed (datasource %s gave no signature); applied", name, ds.name)
            continue
        if not keys:
            setattr(ds, attribute, None)
            errors.append(f"{name} not applied: {REQUIRE_SETTING} is set but {KEYS_SETTING} is empty")
            continue
        from cloudseed.core.userdata_signatures import SignatureError, verify

        try:
            signer = verify(blob, signature, kind, ds.instance_id, keys)
        except SignatureError as e:
            setattr(ds, attribute, None)
            errors.append(f"{name} not applied: its signature {e}")
            continue
        LOG.info("%s: signature verified (%s...)", name, signer[:40])


def wants_signatures(cfg: dict) -> bool:
    """Does the image check signed user-data (so a datasource's signature files are worth reading)?"""
    return bool(cfg.get(KEYS_SETTING) or cfg.get(REQUIRE_SETTING))


def keep_signature(ds: Any, kind: str, signature: bytes | None) -> None:
    """Record the signature a datasource found beside ``kind`` (``user-data``, ``vendor-data``)."""
    if signature:
        ds.extra.setdefault("signatures", {})[kind] = signature.decode("ascii", "replace")
