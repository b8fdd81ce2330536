"""Turning a user-data blob into a flat, ordered list of typed parts.

This expands every container the formats allow: gzip (by magic bytes, or a gzip MIME type),
MIME multipart (nested), ``#include`` / ``#include-once`` (fetched and processed in place) and
``#cloud-config-archive`` (each entry becomes a part). A part's type comes from its MIME type,
or, for ``text/plain``, ``text/x-shellscript`` and non-MIME data, from its first characters.
Parts are numbered from 1 in the order they are found, which gives unnamed parts their names
(``part-001``, ...), as cloud-init numbers them.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Iterator, Union

from cloudseed.agent.userdata.parts import (
    CLOUD_CONFIG,
    CLOUD_CONFIG_ARCHIVE,
    GZIP_TYPES,
    INCLUDE,
    INCLUDE_ONCE,
    NOT_MULTIPART,
    OCTET_STREAM,
    PLAIN,
    TYPES_DETECTED_FROM_CONTENT,
    content_type_from_start,
)

Payload = Union[str, bytes]

MAX_EXPANDED_BYTES = 64 * 1024 * 1024   # gzip expansion and fetched includes, each
MAX_TOTAL_BYTES = 64 * 1024 * 1024      # all parts of one user-data (or vendor-data) together
MAX_INCLUDE_DEPTH = 8
MAX_FETCHES = 64                        # #include URLs fetched for one user-data, at all levels
_UTF8_BOM = b"\xef\xbb\xbf"
_MIME_MARKER = b"mime-version:"
_ARCHIVE_RESERVED_KEYS = ("content", "filename", "type", "launch-index", "content-disposition",
                          "number-attachments", "content-type")


@dataclass
class RawPart:
    """A part after expansion, before any handler looked at it."""

    number: int                    # 1-based position among all parts
    content_type: str
    payload: Payload
    filename: str | None
    headers: dict[str, str] = field(default_factory=dict)
    origin: str = "user-data"

    @property
    def name(self) -> str:
        return self.filename or f"part-{self.number:03d}"

    @property
    def label(self) -> str:
        """How errors name this part."""
        where = f"part {self.number}" if self.filename else f"part-{self.number:03d}"
        name = f"{self.filename!r} ({where}, {self.content_type}" if self.filename \
            else f"{where} ({self.content_type}"
        return name + (f", from {self.origin})" if self.origin != "user-data" else ")")

    def text(self) -> str:
        if isinstance(self.payload, str):
            return self.payload
        return self.payload.decode("utf-8", "surrogateescape")

    @property
    def launch_index(self) -> int | None:
        value = self.headers.get("Launch-Index")
        try:
            return int(value) if value is not None else None
        except (TypeError, ValueError):
            return None


@dataclass
class _Leaf:
    """A non-container piece of a (possibly MIME) document, with its declared type."""

    declared_type: str
    payload: Payload
    filename: str | None
    filename_in_type: bool          # the name came from Content-Type's ``name=`` parameter
    headers: dict[str, str]
    label: str


class Flattener:
    """Expands blobs into ``parts``; problems are appended to ``errors``, never raised."""

    def __init__(self, errors: list[str], *, allow_includes: bool = True, fetch_timeout: float = 10.0,
                 fetch_retries: int = 2, include_cache_dir: str | None = None, root=None):
        self.parts: list[RawPart] = []
        self.errors = errors
        self.total_bytes = 0      # what the parts hold so far (bounded by MAX_TOTAL_BYTES)
        self.fetches = 0          # #include URLs fetched so far (bounded by MAX_FETCHES)
        self.over_budget = False
        self.allow_includes = allow_includes
        self.fetch_timeout = fetch_timeout
        self.fetch_retries = fetch_retries
        self.include_cache_dir = include_cache_dir
        self.root = root          # the target root file:// includes are read in (None: this host)

    # ------------------------------------------------------------------ blobs and MIME
    def add_blob(self, data: bytes, origin: str = "user-data", depth: int = 0) -> None:
        for leaf in self._leaves(data, origin):
            self._add_leaf(leaf, origin, depth)

    def _leaves(self, data: bytes, origin: str) -> Iterator[_Leaf]:
        if data[:2] == b"\x1f\x8b":
            try:
                data = gunzip(data)
            except ValueError as e:
                self.errors.append(f"{origin}: looks gzip-compressed but {e}; using it as it is")
        if data[:3] == _UTF8_BOM:  # editors on Windows start files with one; cloud-init then sees no format marker
            data = data[3:]
        if _MIME_MARKER in data[:4096].lower():
            yield from self._mime_leaves(data, origin)
            return
        yield _Leaf(NOT_MULTIPART, data.decode("utf-8", "surrogateescape"), None, False,
                    {"Content-Type": NOT_MULTIPART, "MIME-Version": "1.0"}, origin)

    def _mime_leaves(self, data: bytes, origin: str) -> Iterator[_Leaf]:
        import email
        import email.utils

        message = email.message_from_bytes(data)
        number = 0
        for part in message.walk():
            if part.is_multipart():
                continue
            number += 1
            raw = part.get_payload(decode=True)
            if raw is None:
                raw = b""
            payload: Payload = raw
            if part.get_content_maintype() == "text":
                payload = raw.decode("utf-8", "surrogateescape")
            filename = part.get_filename()
            in_type = filename is not None and part.get_param(
                "filename", None, "content-disposition") is None
            yield _Leaf(part.get_content_type(), payload, filename or None, in_type,
                        {k: str(v) for k, v in part.items()},
                        f"{origin}, MIME part {number} ({part.get_content_type()})")

    def _add_leaf(self, leaf: _Leaf, origin: str, depth: int) -> None:
        declared: str | None = leaf.declared_type
        payload = leaf.payload
        filename, headers = leaf.filename, dict(leaf.headers)
        compressed = declared in GZIP_TYPES
        if compressed:
            try:
                raw = payload if isinstance(payload, bytes) else payload.encode("utf-8", "surrogateescape")
                payload = gunzip(raw).decode("utf-8")
            except (ValueError, UnicodeDecodeError) as e:
                self.errors.append(f"{leaf.label}: gzip content could not be used: {e}; part skipped")
                return
            declared = None
            headers = {"MIME-Version": "1.0"}
            if "Launch-Index" in leaf.headers:
                headers["Launch-Index"] = leaf.headers["Launch-Index"]
        declared = declared or PLAIN
        ctype = None
        if declared in TYPES_DETECTED_FROM_CONTENT:
            ctype = content_type_from_start(payload)
        ctype = ctype or declared
        if ctype != declared and leaf.filename_in_type and not compressed:
            filename = None     # cloud-init rewrites Content-Type, dropping its name= parameter
        headers["Content-Type"] = ctype
        if ctype in (INCLUDE, INCLUDE_ONCE):
            self._include(payload, leaf.label, depth)
        elif ctype == CLOUD_CONFIG_ARCHIVE:
            self._archive(payload, leaf.label)
        else:
            self._attach(ctype, payload, filename, headers, origin)

    def _attach(self, ctype: str, payload: Payload, filename: str | None, headers: dict[str, str],
                origin: str) -> None:
        if self.over_budget:
            return
        self.total_bytes += len(payload)
        if self.total_bytes > MAX_TOTAL_BYTES:
            self.over_budget = True
            self.errors.append(f"{origin}: the user-data's parts hold more than {MAX_TOTAL_BYTES // (1024 * 1024)} "
                               f"MiB together; part {len(self.parts) + 1} and every later part skipped")
            return
        self.parts.append(RawPart(len(self.parts) + 1, ctype, payload, filename or None, headers, origin))

    # ------------------------------------------------------------------ includes
    def _include(self, payload: Payload, label: str, depth: int) -> None:
        from cloudseed.agent.userdata import includes

        text = payload if isinstance(payload, str) else payload.decode("utf-8", "surrogateescape")
        once = False
        for line_number, line in enumerate(text.splitlines(), 1):
            lowered = line.lower()
            if lowered.startswith("#include-once"):
                line, once = line[len("#include-once"):].lstrip(), True
            elif lowered.startswith("#include"):
                line, once = line[len("#include"):].lstrip(), False
            if line.startswith("#"):
                continue
            url = line.strip()
            if not url:
                continue
            where = f"{label}, {'#include-once' if once else '#include'} line {line_number}"
            if not self.allow_includes:
                self.errors.append(f"{where}: not fetching {url}: includes are disabled")
                continue
            if self.over_budget:
                return
            if self.fetches >= MAX_FETCHES:
                self.errors.append(f"{where}: not fetching {url}: more than {MAX_FETCHES} includes in one "
                                   "user-data")
                continue
            if depth >= MAX_INCLUDE_DEPTH:
                self.errors.append(f"{where}: not fetching {url}: includes nested deeper than "
                                   f"{MAX_INCLUDE_DEPTH} levels (an include loop?)")
                continue
            self.fetches += 1
            try:
                if once:
                    data = includes.fetch_once(url, self.include_cache_dir, timeout=self.fetch_timeout,
                                               retries=self.fetch_retries, problems=self.errors, root=self.root)
                else:
                    data = includes.fetch(url, timeout=self.fetch_timeout, retries=self.fetch_retries,
                                          root=self.root)
            except includes.IncludeError as e:
                self.errors.append(f"{where}: {e}")
                continue
            self.add_blob(data, f"include {url}", depth + 1)

    # ------------------------------------------------------------------ archives
    def _archive(self, payload: Payload, label: str) -> None:
        from cloudseed.agent.userdata.kept_yaml import InvalidYaml, load_cloud_config_yaml

        text = payload if isinstance(payload, str) else payload.decode("utf-8", "surrogateescape")
        try:
            entries = load_cloud_config_yaml(text)  # not kept: an archive may hold sets and binary
        except InvalidYaml as e:
            self.errors.append(f"{label}: cloud-config-archive is not valid YAML: {e}")
            return
        if entries is None:
            return
        if not isinstance(entries, (list, set)):
            self.errors.append(f"{label}: cloud-config-archive must be a YAML list, "
                               f"not a {type(entries).__name__}")
            return
        for number, entry in enumerate(entries, 1):
            where = f"{label}, archive entry {number}"
            if isinstance(entry, str):
                entry = {"content": entry}
            if not isinstance(entry, dict):
                self.errors.append(f"{where}: must be a string or a mapping; skipped")
                continue
            content = entry.get("content", "")
            if not isinstance(content, (str, bytes)):
                self.errors.append(f"{where}: 'content' must be a string, not a "
                                   f"{type(content).__name__}; skipped")
                continue
            mtype = entry.get("type")
            if not mtype:
                default = OCTET_STREAM if isinstance(content, bytes) else CLOUD_CONFIG
                mtype = content_type_from_start(content, default)
            if not isinstance(mtype, str) or "/" not in mtype:
                self.errors.append(f"{where}: 'type' {mtype!r} is not a MIME type (main/sub); skipped")
                continue
            if mtype.split("/", 1)[0] == "text" and isinstance(content, bytes):
                try:
                    content = content.decode("utf-8")
                except UnicodeDecodeError:
                    self.errors.append(f"{where}: binary content given a text type {mtype}; skipped")
                    continue
            headers = {"Content-Type": mtype.lower(), "MIME-Version": "1.0"}
            if "launch-index" in entry:
                headers["Launch-Index"] = str(entry["launch-index"])
            for key, value in entry.items():
                if str(key).lower() not in _ARCHIVE_RESERVED_KEYS:
                    headers[str(key)] = str(value)
            filename = str(entry["filename"]) if "filename" in entry else None
            self._attach(mtype.lower(), content, filename, headers, label)


def gunzip(data: bytes, limit: int = MAX_EXPANDED_BYTES) -> bytes:
    """Decompress gzip ``data``; ValueError if it is not gzip or expands beyond ``limit`` bytes."""
    import gzip

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as stream:
            out = stream.read(limit + 1)
    except (OSError, EOFError, ValueError) as e:
        raise ValueError(f"cannot be decompressed ({e})")
    if len(out) > limit:
        raise ValueError(f"expands beyond {limit // (1024 * 1024)} MiB")
    return out
