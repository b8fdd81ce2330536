"""Signed user-data on the guest: check the datasource's user-data and vendor-data against the image's keys.

Settings, from the image's configuration only (user-data cannot loosen them):
- ``trusted_userdata_keys``: OpenSSH public keys (the metadata registry's, ``cloudseed userdata key``,
  or a user's own, ``cloudseed userdata sign``);
- ``require_signed_userdata: true``: user-data or vendor-data without a valid signature for this
  instance is not applied (the boot goes on with the image's configuration and says why in the
  status: fail closed).

A datasource that found a signature beside the data puts it in ``ds.extra["signatures"]``
(``{"user-data": TEXT, "vendor-data": TEXT, "vendor-data2": TEXT}``, ``keep_signature``), with the
document it covers when that is not the blob itself (a config drive's ``vendor_data.json``, which
the datasource unwraps). A metadata service's datasource names where it read each blob and
``read_signatures`` fetches ``PATH.sig`` beside it, with the datasource's own way of asking (its
headers, token, source port). A signature that does not verify (another key, changed data, another
instance's) is an error and that data is not applied, required or not; a missing signature is only
a note in the log unless signatures are required. Verifying runs ``ssh-keygen -Y verify``
(``cloudseed.core.userdata_signatures``): nothing is imported for it, and nothing at all happens
(no module imported, no request made) when neither setting is there (``DatasourceContext.checks_signatures``).
"""

from __future__ import annotations

import logging

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

LOG = logging.getLogger("cloudseed.userdata")

KEYS_SETTING = "trusted_userdata_keys"
REQUIRE_SETTING = "require_signed_userdata"
# each blob: its name (the kind its signature is made as) and the datasource attribute holding it
BLOBS = (("user-data", "userdata_raw"), ("vendor-data", "vendordata_raw"), ("vendor-data2", "vendordata2_raw"))
ATTRIBUTES = dict(BLOBS)


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
    signatures, documents, unsigned = (_mapping(ds.extra, key) for key in ("signatures", "signed_documents",
                                                                          "unsigned"))
    for name, attribute in BLOBS:
        blob = getattr(ds, attribute, None)
        if not blob:
            continue
        signature = signatures.get(name)
        if not signature:
            why = f"datasource {ds.name} gave no signature" + (f": {unsigned[name]}" if unsigned.get(name) else "")
            if require:
                setattr(ds, attribute, None)
                errors.append(f"{name} not applied: it is not signed and {REQUIRE_SETTING} is set ({why})")
            else:
                LOG.info("%s is not signed (%s); applied", name, why)
            continue
        if not keys:
            setattr(ds, attribute, None)
            errors.append(f"{name} not applied: {REQUIRE_SETTING} is set but {KEYS_SETTING} is empty")
            continue
        from cloudseed.core.userdata_signatures import SignatureError, verify

        try:
            document = documents.get(name)  # the JSON document the datasource unwrapped the blob from
            signed = document.encode("utf-8") if isinstance(document, str) else blob
            signer = verify(signed, signature, name, ds.instance_id, keys)
        except SignatureError as e:
            setattr(ds, attribute, None)
            errors.append(f"{name} not applied: its signature {e}")
            continue
        LOG.info("%s: signature verified (%s...)", name, signer[:40])


def _mapping(extra: dict, key: str) -> dict:
    value = extra.get(key)
    return value if isinstance(value, dict) else {}


def keep_signature(ds: Any, kind: str, signature: bytes | None, document: bytes | None = None) -> None:
    """Record the signature a datasource found beside ``kind`` (``user-data``, ``vendor-data``,
    ``vendor-data2``); ``document``: what it covers when that is not the blob itself (the JSON
    document the datasource unwrapped the blob from; UTF-8 text)."""
    if not signature:
        return
    if document is not None:
        try:
            ds.extra.setdefault("signed_documents", {})[kind] = document.decode("utf-8")
        except UnicodeDecodeError:  # not what a signed JSON document can be: left unsigned
            ds.extra.setdefault("unsigned", {})[kind] = "the signed document is not UTF-8 text"
            return
    ds.extra.setdefault("signatures", {})[kind] = signature.decode("ascii", "replace")


def read_signatures(ds: Any, sources: dict, get: Any) -> None:
    """Read the signature served beside each blob ``ds`` holds. ``sources``: ``{kind: (URL, headers)}``,
    the URL that served that blob, or ``(URL, headers, document)`` when it served a document the
    datasource unwrapped the blob from (what the signature covers); ``get(URL.sig, headers)``: the
    body, None when none is served (404), raising when it cannot be read. A signature that cannot
    be had is no error here: the blob is then unsigned (``check`` says why, and refuses it when
    signatures are required)."""
    from cloudseed.core.userdata_signatures import signature_url

    for kind, (url, headers, *document) in sources.items():
        if not getattr(ds, ATTRIBUTES[kind], None):
            continue
        where = signature_url(url)
        try:
            body = get(where, headers)
        except Exception as e:  # noqa: BLE001 - any failure leaves the blob unsigned (fail closed)
            body, reason = None, f"{where}: {e}"
        else:
            reason = f"{where}: not served"
        if body:
            keep_signature(ds, kind, body, *document)
            LOG.debug("%s: %s read", kind, where)
        else:
            ds.extra.setdefault("unsigned", {})[kind] = reason
            LOG.info("%s: no signature (%s)", kind, reason)
