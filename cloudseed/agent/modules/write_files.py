"""write_files: write files given in cloud-config (encodings, owner, permissions, append, defer, source).

Each entry is written atomically through the target root. A bad entry is reported with its
index and path and the other entries are still written. Entries with ``defer: true`` are left
to ``write_files_deferred`` in the final stage (after users exist). ``source: {uri, headers}``
(cloud-init 24.3) loads the content from http(s) or a file in the root (``_write_files_source``),
falling back to ``content`` when that fails.

One entry's content is at most 64 MiB once decoded; everything one boot's ``write_files`` and
``write_files_deferred`` write together is at most ``write_files_max_total`` (256 MiB unless the
image's configuration says otherwise: user-data cannot raise it). An entry that would go past it
is not written and named in the error; later entries that still fit are written.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

from cloudseed.agent.modules import STAGE_INIT, ModuleContext, ModuleError, ModuleSpec
from cloudseed.core.root import RootError
from cloudseed.core.values import as_bool

DEFAULT_PERMISSIONS = 0o644
DEFAULT_OWNER = "root:root"
ENCODINGS = ("b64", "base64", "gz", "gzip", "gz+b64", "gz+base64", "gzip+b64", "gzip+base64",
             "text/plain")

MODULE = ModuleSpec(
    name="write_files",
    stage=STAGE_INIT,
    activate_by=("write_files",),
    title="Write arbitrary files",
    schema={"properties": {"write_files": {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["path"],
            "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"},
                # cloud-init 24.3: content from a URI, ``content`` being the fallback
                "source": {"type": "object", "required": ["uri"], "additionalProperties": False, "properties": {
                    "uri": {"type": "string", "minLength": 1},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}}}},
                "owner": {"type": "string"},
                "permissions": {"type": "string"},
                "encoding": {"type": "string", "enum": list(ENCODINGS)},
                "append": {"type": "boolean"},
                "defer": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
    }}},
    examples=(
        """\
#cloud-config
write_files:
  - path: /etc/app/app.conf
    content: |
      listen = 0.0.0.0:8080
    owner: root:root
    permissions: "0640"
  - path: /etc/motd
    content: "Managed by cloudseed\\n"
    append: true
""",
        """\
#cloud-config
# Binary or compressed content: b64, gzip or gz+b64.
write_files:
  - path: /usr/local/bin/hello
    encoding: b64
    content: IyEvYmluL3NoCmVjaG8gaGVsbG8K
    permissions: "0755"
""",
    ),
)


class EntryError(Exception):
    """One write_files entry is unusable."""


MAX_DECODED_BYTES = 64 * 1024 * 1024  # one entry's content after base64 and gzip
TOTAL_KEY = "write_files_max_total"  # image configuration only
DEFAULT_MAX_TOTAL = 256 * 1024 * 1024  # all entries of one boot, both stages
WRITTEN_THIS_BOOT = "write_files.bytes"  # in the run directory: what this boot's entries wrote so far


def decode_content(content: Any, encoding: str | None, where: str, limit: int = MAX_DECODED_BYTES) -> bytes:
    """The bytes an entry asks for, decoding b64/gzip as its ``encoding`` says (at most ``limit``)."""
    if content is None:
        return b""
    if isinstance(content, bytes):
        raw = content
    else:
        raw = str(content).encode("utf-8")
    enc = (encoding or "text/plain").strip().lower() if isinstance(encoding, (str, type(None))) else "?"
    if enc not in ENCODINGS:
        raise EntryError(f"{where}.encoding: unknown encoding (use {', '.join(ENCODINGS[:6])})")
    try:
        if "b64" in enc or "base64" in enc:
            raw = base64.b64decode(raw, validate=False)
        if enc.startswith("gz"):
            raw = _gunzip(raw, limit, where)
    except (binascii.Error, ValueError) as e:
        raise EntryError(f"{where}.content: not valid base64 ({e})") from None
    except (OSError, EOFError, zlib.error):
        raise EntryError(f"{where}.content: not valid gzip data") from None
    if len(raw) > limit:
        raise EntryError(f"{where}.content: more than {limit // (1024 * 1024)} MiB")
    return raw


def _gunzip(data: bytes, limit: int, where: str) -> bytes:
    """gzip data decompressed in steps, never holding more than ``limit`` bytes (a gzip bomb stops early)."""
    out = bytearray()
    while data:
        stream = zlib.decompressobj(wbits=31)   # one gzip member
        chunk = data
        while chunk:
            out += stream.decompress(chunk, limit + 1 - len(out))
            if len(out) > limit:
                raise EntryError(f"{where}.content: expands to more than {limit // (1024 * 1024)} MiB")
            chunk = stream.unconsumed_tail
        if not stream.eof:
            raise EOFError("truncated gzip data")
        data = stream.unused_data   # a following member (gzip allows several)
    return bytes(out)


def parse_permissions(value: Any, where: str) -> int:
    if value is None or value == "":
        return DEFAULT_PERMISSIONS
    if isinstance(value, bool):
        raise EntryError(f"{where}.permissions: expected an octal mode such as '0644'")
    if isinstance(value, int):
        # YAML already read an unquoted 0644 as octal; a plain int is taken as is (as cloud-init does)
        if not 0 <= value <= 0o7777:
            raise EntryError(f"{where}.permissions: not a file mode (quote it: '0644')")
        return value
    text = str(value).strip()
    try:
        return int(text[2:] if text.lower().startswith("0o") else text, 8)
    except ValueError:
        raise EntryError(f"{where}.permissions: not an octal mode such as '0644'") from None


def total_limit(ctx: ModuleContext) -> int:
    """The image's ``write_files_max_total`` in bytes; user-data or vendor-data changing it is a warning."""
    value = ctx.system_cfg.get(TOTAL_KEY, DEFAULT_MAX_TOTAL)
    if TOTAL_KEY in ctx.cfg and ctx.cfg[TOTAL_KEY] != value:
        ctx.warn(f"{TOTAL_KEY}: only the image's configuration sets it; user-data and vendor-data cannot "
                 f"(the limit stays {_mib(value) if isinstance(value, int) else value})")
    if value == DEFAULT_MAX_TOTAL:
        return DEFAULT_MAX_TOTAL
    from cloudseed.agent.disks import human_bytes

    try:
        return human_bytes(value, TOTAL_KEY)
    except ValueError as e:
        ctx.warn(f"{e}; using {_mib(DEFAULT_MAX_TOTAL)}")
        return DEFAULT_MAX_TOTAL


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def _written_before(ctx: ModuleContext) -> int:
    try:
        return int(ctx.root.read_text(ctx.paths.run(WRITTEN_THIS_BOOT)).strip() or 0)
    except (OSError, ValueError):
        return 0


def _from_source(ctx: ModuleContext, entry: dict, where: str) -> bytes | None:
    """An entry's ``source`` loaded (as is, no decoding), or None to use its ``content``.

    A source that cannot be loaded falls back to ``content`` with a warning; without ``content``
    the entry is not written (EntryError)."""
    if entry.get("source") is None:
        return None
    from cloudseed.agent.modules._write_files_source import SourceError, load_source

    try:
        return load_source(ctx.root, entry["source"], where, MAX_DECODED_BYTES)
    except SourceError as e:
        if entry.get("content") is None:
            raise EntryError(f"{e}; no content to fall back to, not written") from None
        ctx.warn(f"{e}; its content was written instead")
        return None


def write_entries(ctx: ModuleContext, entries: list, deferred: bool) -> None:
    if not isinstance(entries, list):
        raise ModuleError("write_files: expected a list of files")
    failures = []
    written = done_before = 0
    limit, total = total_limit(ctx), _written_before(ctx)
    start_total = total
    for index, entry in enumerate(entries):
        where = f"write_files[{index}]"
        if not isinstance(entry, dict):
            failures.append(f"{where}: expected a mapping with a path")
            continue
        if as_bool(entry.get("defer"), False) != deferred:
            continue
        path = entry.get("path")
        if not path or not isinstance(path, str):
            failures.append(f"{where}.path: missing")
            continue
        if "\0" in path or any(ord(c) < 32 for c in path):
            failures.append(f"{where}.path: contains a NUL byte or a control character")
            continue
        where = f"{where} ({path})"
        if not path.startswith("/"):
            failures.append(f"{where}.path: must be absolute")
            continue
        # an earlier run of this module that failed on another entry wrote this one already: not again
        # (an append is recorded before it is made: it happens at most once per instance)
        part = f"{index}:{json.dumps(entry, sort_keys=True, default=repr)}"
        if ctx.done_before(part):
            done_before += 1
            continue
        append = as_bool(entry.get("append"), False)
        before = written
        try:
            data = _from_source(ctx, entry, where)
            if data is None:
                data = decode_content(entry.get("content"), entry.get("encoding"), where)
            if total + len(data) > limit:
                failures.append(f"{where}: its {_mib(len(data))} would take this boot's write_files past "
                                f"{_mib(limit)} ({_mib(total)} written before it; {TOTAL_KEY} in the image's "
                                "configuration); not written")
                continue
            mode = parse_permissions(entry.get("permissions"), where)
            owner, _, group = str(entry.get("owner") or DEFAULT_OWNER).partition(":")
            if deferred and _owner_half_made(ctx, owner):
                failures.append(f"{where}: its owner {owner!r} was left half made by users_groups (its home is "
                                "made again when that module runs again); written then")
                continue
            if append and not ctx.record_done(part, durable=True):
                raise EntryError(f"{where}: not appended now: that it was could not be recorded (a full or "
                                 "read-only disk?), and a later run would append it again; it is appended "
                                 "when the module runs again")
            ctx.root.write(path, data, mode=mode, owner=owner or None, group=group or None, append=append)
            written += 1
            total += len(data)
            if not append:
                ctx.record_done(part)
        except EntryError as e:
            failures.append(str(e))
        except RootError as e:
            hint = "" if deferred else " (use 'defer: true' for files owned by users created at boot)"
            failures.append(f"{where}: {e}{hint}")
        except OSError as e:
            failures.append(f"{where}: {e.strerror or e}")
        except Exception as e:  # noqa: BLE001 - one entry's surprise never costs the others
            failures.append(f"{where}: cannot be written ({type(e).__name__})")
        if append and written == before:
            ctx.forget_done(part)  # not appended after all: the next run tries again
    if total != start_total:
        ctx.root.write(ctx.paths.run(WRITTEN_THIS_BOOT), f"{total}\n", mode=0o600)
    ctx.log.info("wrote %d file(s)" + (f", {done_before} written by an earlier run" if done_before else ""), written)
    if failures:
        raise ModuleError("; ".join(failures))


def _owner_half_made(ctx: ModuleContext, owner: str) -> bool:
    """A deferred file's owner that users_groups could not finish making (its home would be removed
    with the file in it when the user is made again)."""
    if owner in ("", "root"):
        return False
    from cloudseed.agent.modules.users_groups import left_half_made

    return left_half_made(ctx, owner)


def handle(ctx: ModuleContext) -> None:
    write_entries(ctx, ctx.cfg.get("write_files") or [], deferred=False)
