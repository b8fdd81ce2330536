"""``type: hyperv``: events as Hyper-V KVP records in the guest's pool file, which Azure's host reads.

The records are cloud-init's, so Azure's diagnostics read cloudseed's boots as they read
cloud-init's: fixed-size records of a 512-byte key and a 2048-byte value (UTF-8, NUL-padded),
appended under an exclusive ``flock`` (the KVP daemon, ``hv_kvp_daemon``, reads the same file);
key ``CLOUD_INIT|<incarnation>|<event_type>|<name>|<vm id>|<uuid>``, the incarnation being the
boot time in epoch seconds and the VM id the DMI system UUID; value compact JSON ``{"name",
"type", "ts" (ISO 8601 UTC), "result", "duration", "msg"}`` of at most 1024 bytes (Azure's
limit): a longer description is split over several records whose keys end ``|0``, ``|1``... and
whose values carry ``msg_i``. The pool file (``kvp_file_path``, default
``/var/lib/hyperv/.kvp_pool_1``, inside the target root) is emptied if it is older than this
boot (on the running system only). ``event_types`` (a list) keeps only those types. The file is written directly, not
through an atomic replace: the daemon holds it open, and appending is its protocol.
"""

from __future__ import annotations

import datetime
import json
import os
import uuid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

POOL_FILE = "/var/lib/hyperv/.kvp_pool_1"
KEY_SIZE = 512
VALUE_SIZE = 2048
RECORD_SIZE = KEY_SIZE + VALUE_SIZE
AZURE_VALUE_SIZE = 1024
PREFIX = "CLOUD_INIT"
ZERO_GUID = str(uuid.UUID(int=0))


def encode_record(key: str, value: str) -> bytes:
    return key.encode("utf-8")[:KEY_SIZE].ljust(KEY_SIZE, b"\0") + value.encode("utf-8")[:VALUE_SIZE].ljust(
        VALUE_SIZE, b"\0")


def decode_records(data: bytes) -> list[tuple[str, str]]:
    """(key, value) of every whole record in a pool file's bytes."""
    out = []
    for at in range(0, len(data) - RECORD_SIZE + 1, RECORD_SIZE):
        record = data[at:at + RECORD_SIZE]
        out.append((record[:KEY_SIZE].decode("utf-8", "replace").rstrip("\0"),
                    record[KEY_SIZE:].decode("utf-8", "replace").rstrip("\0")))
    return out


def _compact(value: dict) -> str:
    return json.dumps(value, separators=(",", ":"))


def encode_event(event: dict, incarnation: int, vm_id: str) -> list[bytes]:
    """The records of one event (``Event.as_dict()``), split when its value would exceed 1024 bytes."""
    key = f"{PREFIX}|{incarnation}|{event['event_type']}|{event['name']}|{vm_id}|{uuid.uuid4()}"
    meta: dict[str, Any] = {"name": event["name"], "type": event["event_type"],
                            "ts": datetime.datetime.fromtimestamp(event["timestamp"],
                                                                  datetime.timezone.utc).isoformat()}
    if "result" in event:
        meta["result"] = event["result"]
    if "duration" in event:
        meta["duration"] = event["duration"]
    message = event.get("description", "")
    whole = _compact({**meta, "msg": message})
    if len(whole.encode("utf-8")) <= AZURE_VALUE_SIZE:
        return [encode_record(key, whole)]
    records, index = [], 0
    while True:
        room = AZURE_VALUE_SIZE - len(_compact({**meta, "msg_i": index, "msg": ""}).encode("utf-8")) - 8
        piece, message = _cut(message, room)
        records.append(encode_record(f"{key}|{index}", _compact({**meta, "msg_i": index, "msg": piece})))
        index += 1
        if not message:
            return records


def _cut(text: str, room: int) -> tuple[str, str]:
    """The longest head of ``text`` whose JSON string form fits ``room`` bytes, and the rest."""
    size = 0
    for i, char in enumerate(text):
        size += len(json.dumps(char)) - 2  # as _compact writes it: non-ASCII as \uXXXX
        if size > room:
            return text[:max(1, i)], text[max(1, i):]
    return text, ""


class KvpHandler:
    def __init__(self, path: str, event_types: list | None, incarnation: int, vm_id: str):
        self.path = path
        self.event_types = event_types
        self.incarnation = incarnation
        self.vm_id = vm_id

    def publish(self, event: Any) -> None:
        if self.event_types and event.event_type not in self.event_types:
            return
        self.append(encode_event(event.as_dict(), self.incarnation, self.vm_id))

    def append(self, records: list[bytes]) -> None:
        import fcntl

        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, b"".join(records))
        finally:
            os.close(fd)  # releases the lock

    def flush(self, deadline: float) -> None:
        return None


def _boot_epoch(root: Any) -> int:
    try:
        uptime = float(root.read_text("/proc/uptime").split()[0]) if root.is_live else 0.0
    except (OSError, ValueError, IndexError):
        uptime = 0.0
    import time

    return int(time.time() - uptime)


def _vm_id(root: Any) -> str:
    try:
        found = root.read_text("/sys/class/dmi/id/product_uuid").strip().lower()
    except OSError:
        return ZERO_GUID
    return found or ZERO_GUID


def make(options: dict, context: Any) -> KvpHandler:
    from cloudseed.agent.reporting import ReportingError

    where = f"reporting.{context.name}"
    unknown = sorted(set(options) - {"kvp_file_path", "event_types"})
    if unknown:
        raise ReportingError(f"{where}: unknown key {unknown[0]!r} for type hyperv (known: kvp_file_path, "
                             "event_types)")
    inner = options.get("kvp_file_path", POOL_FILE)
    if not isinstance(inner, str) or not inner.startswith("/"):
        raise ReportingError(f"{where}.kvp_file_path: must be an absolute path")
    types = options.get("event_types")
    if types is not None and (not isinstance(types, list) or not all(t in ("start", "finish") for t in types)):
        raise ReportingError(f"{where}.event_types: must be a list of start and finish")
    root = context.root
    incarnation = _boot_epoch(root)
    path = root.path(inner)
    if not root.isdir(os.path.dirname(inner)):
        root.makedirs(os.path.dirname(inner), mode=0o755)
    try:
        if root.is_live and os.path.exists(path) and os.path.getmtime(path) < incarnation:
            os.truncate(path, 0)  # records of an earlier boot: the host must not read them as this one's
    except OSError as e:
        raise ReportingError(f"{where}.kvp_file_path: {inner}: {e.strerror}")
    return KvpHandler(path, types, incarnation, _vm_id(root))
