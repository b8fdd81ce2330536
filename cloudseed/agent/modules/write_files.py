"""write_files: write files given in cloud-config (encodings, owner, permissions, append, defer).

Each entry is written atomically through the target root. A bad entry is reported with its
index and path and the other entries are still written. Entries with ``defer: true`` are left
to ``write_files_deferred`` in the final stage (after users exist).
"""

from __future__ import annotations

import base64
import binascii
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


def write_entries(ctx: ModuleContext, entries: list, deferred: bool) -> None:
    if not isinstance(entries, list):
        raise ModuleError("write_files: expected a list of files")
    failures = []
    written = 0
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
        try:
            data = decode_content(entry.get("content"), entry.get("encoding"), where)
            mode = parse_permissions(entry.get("permissions"), where)
            owner, _, group = str(entry.get("owner") or DEFAULT_OWNER).partition(":")
            ctx.root.write(path, data, mode=mode, owner=owner or None, group=group or None,
                           append=as_bool(entry.get("append"), False))
            written += 1
        except EntryError as e:
            failures.append(str(e))
        except RootError as e:
            hint = "" if deferred else " (use 'defer: true' for files owned by users created at boot)"
            failures.append(f"{where}: {e}{hint}")
        except OSError as e:
            failures.append(f"{where}: {e.strerror or e}")
        except Exception as e:  # noqa: BLE001 - one entry's surprise never costs the others
            failures.append(f"{where}: cannot be written ({type(e).__name__})")
    ctx.log.info("wrote %d file(s)", written)
    if failures:
        raise ModuleError("; ".join(failures))


def handle(ctx: ModuleContext) -> None:
    write_entries(ctx, ctx.cfg.get("write_files") or [], deferred=False)
