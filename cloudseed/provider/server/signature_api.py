"""``PATH.sig`` on every API: the signature of the user-data (or vendor-data) that PATH serves.

One route for all the metadata APIs, so no API file knows about signatures: a GET (or HEAD) of
any path ending in ``.sig`` is answered by routing the path without it, as the same instance
with the same headers (an IMDSv2 token, ``Metadata-Flavor``... are checked as for the data),
and, when that answer is the instance's user-data (as served, or base64 of it), its vendor-data
text (also as one item of a listing, Vultr's ``/v1/vendor-data``), or a vendor data document the
guest unwraps (OpenStack's ``vendor_data.json``/``vendor_data2.json``, MAAS's YAML ``vendor-data``,
as served),
answering the signature of it instead: an SSH signature by the registry's key over the data and
the instance-id as that API's guest reads it (GCE's number, Azure's vmId...:
``userdata_signing.guest_instance_id``; ``cloudseed.provider.userdata_signing``). Anything else is
404. A signature is made once per instance record, kind and instance-id, and kept with its other
rendered answers.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cloudseed.core.userdata_signatures import SUFFIX
from cloudseed.provider.server.engine.http import Response, text_error

_NOT_SIGNED = text_error(404, "no signature here: the path without .sig does not serve user-data or vendor-data")


def is_signature_path(path: str) -> bool:
    return path.endswith(SUFFIX) and len(path) > len(SUFFIX) + 1


def answer(app: Any, request: Any, instance: Any, route: Any) -> Any:
    """The answer to ``request`` for ``PATH.sig``; ``route(request, instance)`` answers a path."""
    original = request.path
    request.path = original[:-len(SUFFIX)]
    try:
        inner = route(request, instance)
    except BaseException:
        request.path = original
        raise
    api, path = request.api, request.path  # the API that answered the data's path
    if isinstance(inner, Response):
        request.path = original
        return _signature_of(app, instance, inner, api, path)

    async def later() -> Response:
        try:
            return _signature_of(app, instance, await inner, api, path)
        finally:
            request.path = original

    return later()


def _signature_of(app: Any, instance: Any, inner: Response, api: str, path: str) -> Response:
    if inner.status != 200:
        return inner if inner.status != 404 else _NOT_SIGNED
    from cloudseed.provider.userdata_signing import guest_instance_id

    record = instance.record
    kind, data = _served(record, inner.body, api, path)
    if kind is None:
        return _NOT_SIGNED
    instance_id = guest_instance_id(api, record)
    key = f"signature:{kind}:{instance_id}:{hash(data)}"
    found = instance.responses.get(key)
    if found is None:
        found = instance.responses[key] = Response(200, signer(app).sign(kind, instance_id, data))
    return found


def _served(record: Any, body: bytes, api: str = "", path: str = "") -> tuple[str | None, bytes]:
    """(kind, the data signed) when ``body`` is the record's user-data or vendor-data as ``api``
    serves it at ``path``; (None, b"") else."""
    from cloudseed.provider.userdata_signing import VENDOR_DOCUMENTS, vendor_data_bytes

    document_kind = VENDOR_DOCUMENTS.get((api, path.rsplit("/", 1)[-1]))
    if document_kind is not None:  # the document as served (JSON, YAML: the guest unwraps it after checking)
        held = record.vendor_data if document_kind == "vendor-data" else record.vendor_data2
        return (document_kind, body) if held is not None and body else (None, b"")
    user = record.user_data
    if user and body == user:
        return "user-data", user
    vendor = vendor_data_bytes(record.vendor_data)
    if vendor and body in (vendor, vendor + b"\n"):  # or the one item of a listing (a newline after it)
        return "vendor-data", vendor
    if user and body:
        try:
            if base64.b64decode(body, validate=True) == user:  # APIs serving it base64 (the guest decodes)
                return "user-data", user
        except (binascii.Error, ValueError):
            pass
    return None, b""


def signer(app: Any) -> Any:
    """The registry's user-data signer, loaded once per server process."""
    found = getattr(app, "_userdata_signer", None)
    if found is None:
        from cloudseed.provider.userdata_signing import shared_signer

        found = app._userdata_signer = shared_signer(app.registry)
    return found
