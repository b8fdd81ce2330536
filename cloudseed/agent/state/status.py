"""Boot status: ``/run/cloudseed/status.json`` while stages run, ``result.json`` when done.

The layout follows cloud-init's (``v1`` with one record per stage: ``init-local``, ``init``,
``modules-config``, ``modules-final``), so scripts written against it keep working; each
record also lists the module results and warnings.
"""

from __future__ import annotations

import logging
import os
import time

from cloudseed.agent.state import Paths, compat_paths

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

STAGE_KEYS = {"local": "init-local", "network": "init", "config": "modules-config", "final": "modules-final"}
STAGE_ORDER = ("local", "network", "config", "final")
LOG = logging.getLogger("cloudseed.status")


FAILED_MARKER = "failed"    # in the run directory: a failure the status file could not take
RESERVE = ".reserve"        # in the run directory: room kept for the status record of a failure
RESERVE_BYTES = 64 * 1024
_NO_ROOM = (28, 122)        # ENOSPC, EDQUOT
MARKER_BYTES = 120          # a link this short lives in its inode: it fits on a full disk


def status_problem(data: Any) -> str | None:
    """Why ``data`` is not a boot status record (``status.json``), or None."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__} where an object belongs"
    v1 = data.get("v1")
    if not isinstance(v1, dict):
        return "its v1 is not an object"
    for key in ("datasource", "stage"):
        if not isinstance(v1.get(key) or "", str):
            return f"v1.{key} is not a name"
    for key in STAGE_KEYS.values():
        record = v1.get(key)
        if record is None:
            continue
        problem = _record_problem(record)
        if problem:
            return f"v1.{key}: {problem}"
    return None


def _record_problem(record: Any) -> str | None:
    if not isinstance(record, dict):
        return f"a {type(record).__name__} where an object belongs"
    for key in ("start", "finished"):
        value = record.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"{key} is not a time"
    for key in ("errors", "warnings"):
        if not isinstance(record.get(key, []), list) or not all(isinstance(x, str) for x in record.get(key, [])):
            return f"{key} is not a list of messages"
    modules = record.get("modules", [])
    if not isinstance(modules, list) or not all(isinstance(m, dict) and isinstance(m.get("name"), str)
                                                and isinstance(m.get("status"), str) for m in modules):
        return "modules is not a list of module results"
    if not isinstance(record.get("crashed", ""), str):
        return "crashed is not a message"
    return None


def result_problem(data: Any) -> str | None:
    """Why ``data`` is not a boot result (``result.json``), or None."""
    v1 = data.get("v1") if isinstance(data, dict) else None
    if not isinstance(v1, dict):
        return "not an object with a v1 object"
    for key in ("errors", "warnings"):
        if not isinstance(v1.get(key, []), list) or not all(isinstance(x, str) for x in v1.get(key, [])):
            return f"v1.{key} is not a list of messages"
    return None


class StatusRecorder:
    """Reads, updates and writes the boot status of one root.

    Never raises: a status that cannot be written (a full or read-only disk) frees the room kept
    for it and tries again, then leaves a marker in the run directory (a short link, which needs
    no data block) and a line in the kernel log, so ``status`` still says the boot failed, and why.
    """

    def __init__(self, paths: Paths):
        from cloudseed.agent.state.files import load_json

        self.paths = paths
        loaded = load_json(paths.root, paths.status_file, status_problem)
        self.data: dict[str, Any] = loaded if loaded is not None else self._empty()
        for key, record in self._empty()["v1"].items():
            self.v1.setdefault(key, record)
        self.unsaved = ""   # why the last save failed ("" when it worked)
        self._fold_marker()

    @staticmethod
    def _empty() -> dict[str, Any]:
        v1: dict[str, Any] = {"datasource": None, "stage": None}
        for key in STAGE_KEYS.values():
            v1[key] = {"start": None, "finished": None, "errors": [], "warnings": [], "modules": []}
        return {"v1": v1}

    @property
    def v1(self) -> dict[str, Any]:
        return self.data["v1"]

    def save(self, mark: bool = True) -> bool:
        """Write the status (and cloud-init's links to it); False, with the failure marked, when it cannot."""
        if not self._write(self.paths.status_file, self.data, mark):
            return False
        compat_paths.publish(self.paths, self.data)  # cloud-init's paths, for the tools that poll them
        self._clear_marker()
        return True

    def _write(self, inner: str, data: dict[str, Any], mark: bool = True) -> bool:
        from cloudseed.agent.state import json_text

        text = json_text(data)
        for attempt in range(2):
            try:
                write_json_text(self.paths.root, inner, text)
                self.unsaved = ""
                return True
            except Exception as e:  # noqa: BLE001 - the record of a boot never ends it
                self.unsaved = f"cannot write {inner}: {_reason(e)}"
                if attempt or getattr(e, "errno", None) not in _NO_ROOM or not self._release_reserve():
                    break
        if mark:
            self._mark_failure(self._current_key(), self.unsaved)
        return False

    def start(self, stage: str) -> None:
        self._close_abandoned(stage)
        record = self.v1[STAGE_KEYS[stage]]
        record.update({"start": time.time(), "finished": None, "errors": [], "warnings": [], "modules": []})
        self.v1["stage"] = STAGE_KEYS[stage]
        self.v1["pid"] = os.getpid()
        self._keep_reserve()
        self.save()

    def finish(self, stage: str, errors: list[str], warnings: list[str], modules: list[dict],
               datasource: str | None) -> None:
        record = self.v1[STAGE_KEYS[stage]]
        record.update({"finished": time.time(), "errors": errors, "warnings": warnings, "modules": modules,
                       "recoverable_errors": recoverable(warnings)})  # cloud-init 23.4+ reads this key
        if datasource:
            self.v1["datasource"] = datasource
        self.v1["stage"] = None
        saved = self.save()
        if stage == "final" or errors or not saved:
            self.write_result()
        if stage == "final" and saved:
            self._release_reserve()

    def write_result(self) -> None:
        errors = [e for key in STAGE_KEYS.values() for e in self.v1[key].get("errors", [])]
        warnings = [w for key in STAGE_KEYS.values() for w in self.v1[key].get("warnings", [])]
        if self.unsaved and self.unsaved not in errors:
            errors.append(self.unsaved)
        if self._write(self.paths.result_file,
                       {"v1": {"datasource": self.v1.get("datasource"), "errors": errors, "warnings": warnings}}):
            compat_paths.publish(self.paths, self.data, result_written=True)  # boot-finished after the final stage

    def _close_abandoned(self, stage: str) -> None:
        """An earlier stage that started and never finished was killed: record that as its error.

        Otherwise the boot would end "done" with that stage's work silently missing.
        """
        for earlier in STAGE_ORDER[:STAGE_ORDER.index(stage)]:
            record = self.v1[STAGE_KEYS[earlier]]
            if record.get("start") is not None and record.get("finished") is None:
                record["crashed"] = (f"the {earlier} stage did not finish: its process ended before recording "
                                     "a result (killed, or the machine lost power?)")
                record["errors"] = [*record.get("errors", []), record["crashed"]]
                record["finished"] = time.time()

    def crash(self, stage: str, message: str) -> None:
        """A stage itself failed (not one of its modules): waiting for the boot is over. Never raises."""
        from cloudseed.agent.state.files import take_warnings
        from cloudseed.agent.state.log import console

        try:
            console(f"cloudseed: {message}")
        except Exception:  # noqa: BLE001,S110 - a closed stderr must not stop the record
            pass
        record = self.v1[STAGE_KEYS[stage]]
        record["crashed"] = message
        record["errors"] = [*record.get("errors", []), message]
        record["warnings"] = [*record.get("warnings", []), *take_warnings()]
        record["finished"] = time.time()
        self.v1["stage"] = None
        if not self.save(mark=False):
            self._mark_failure(STAGE_KEYS[stage], message)  # the cause, not the failed write
        self.write_result()

    def mark_disabled(self, reason: str) -> None:
        self.v1["disabled"] = reason
        self.save()

    # ------------------------------------------------------------ when the disk is full
    def _current_key(self) -> str:
        return str(self.v1.get("stage") or "")

    def _keep_reserve(self) -> None:
        """Keep some room in the run directory for the record of a failure (once per boot)."""
        host = self.paths.root.path(self.paths.run(RESERVE))
        if os.path.exists(host):
            return
        try:
            fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError:
            try:
                os.write(fd, bytes(RESERVE_BYTES))
            except OSError:
                os.close(fd)
                fd = -1
                _unlink(host)  # no room for it: not worth keeping half of it
        if fd >= 0:
            os.close(fd)

    def _release_reserve(self) -> bool:
        return _unlink(self.paths.root.path(self.paths.run(RESERVE)))

    def _mark_failure(self, stage_key: str, message: str) -> None:
        """The failure where it fits: a short link in the run directory, and the kernel log."""
        _kernel_log(self.paths.root, message)
        marker = self.paths.root.path_nofollow(self.paths.run(FAILED_MARKER))
        if os.path.islink(marker):
            return  # the first failure this boot is the one to read: what followed is its consequence
        text = f"{stage_key or '-'}\t{message}".encode("utf-8", "replace")
        if len(text) > MARKER_BYTES:
            text = text[:MARKER_BYTES - 3] + b"..."
        try:
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            os.symlink(text, marker)
        except OSError as e:
            LOG.error("the failure could not be recorded anywhere on %s: %s", self.paths.root.top, e)

    def _fold_marker(self) -> None:
        """A failure an earlier process could only mark goes into this status (the marker goes when saved)."""
        failed = read_failure_marker(self.paths)
        if failed is None:
            return
        stage_key, message = failed
        record = self.v1.get(stage_key) if stage_key in STAGE_KEYS.values() else None
        if record is None:
            record = self.v1[STAGE_KEYS[STAGE_ORDER[0]]]
        if message not in record.get("errors", []):
            record["errors"] = [*record.get("errors", []), message]
        record.setdefault("crashed", message)
        if record.get("start") is not None and record.get("finished") is None:
            record["finished"] = time.time()
        self._marker_folded = True

    def _clear_marker(self) -> None:
        if getattr(self, "_marker_folded", False):
            _unlink(self.paths.root.path_nofollow(self.paths.run(FAILED_MARKER)))
            self._marker_folded = False


def write_json_text(root: Any, inner: str, text: str) -> None:
    """Write a status file; a directory standing in its place is set aside first."""
    from cloudseed.core.root import RootError

    try:
        root.write(inner, text, mode=0o644)
    except RootError:
        from cloudseed.agent.state.files import clear_for_file

        if not clear_for_file(root, inner):
            raise
        root.write(inner, text, mode=0o644)


def read_failure_marker(paths: Paths) -> tuple[str, str] | None:
    """(stage key, message) of a failure only the marker holds, or None."""
    try:
        text = os.readlink(paths.root.path_nofollow(paths.run(FAILED_MARKER)))
    except OSError:
        return None
    stage_key, _, message = text.partition("\t")
    stage = next((name for name, key in STAGE_KEYS.items() if key == stage_key), "")
    if stage and message and not message.startswith(f"{stage} stage"):
        message = f"{stage} stage: {message}"
    return stage_key, message or stage_key


def _reason(e: Exception) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror} (errno {e.errno})"
    return f"{type(e).__name__}: {e}"


def _unlink(host: str) -> bool:
    try:
        os.unlink(host)
        return True
    except OSError:
        return False


def _kernel_log(root: Any, message: str) -> None:
    """On the running system, the failure in the kernel log too (it needs no disk)."""
    if not root.is_live:
        return
    try:
        with open("/dev/kmsg", "w") as kmsg:
            kmsg.write(f"<3>cloudseed: {message[:900]}\n")
    except OSError:
        pass


def recoverable(warnings: list[str]) -> dict[str, list[str]]:
    """cloud-init 23.4+'s ``recoverable_errors`` of a stage's warnings: deprecation notes apart."""
    out: dict[str, list[str]] = {}
    for text in warnings:
        level = "DEPRECATED" if ": deprecated" in text or text.startswith("deprecated") else "WARNING"
        out.setdefault(level, []).append(text)
    return out


def load_for_reading(paths: Paths) -> dict[str, Any]:
    """What the read-only verbs need to say how the boot went, never moving or raising on anything.

    ``status``: the status record or None; ``damaged``: why ``status.json`` cannot be used;
    ``result``: a usable ``result.json`` or None; ``failed``: a failure only the marker holds.
    """
    from cloudseed.agent.state import read_json

    root = paths.root
    status, damaged = None, None
    if os.path.lexists(root.path(paths.status_file)):
        status = read_json(root, paths.status_file)
        damaged = "it is not readable JSON" if status is None else status_problem(status)
        if damaged:
            status = None
    result = read_json(root, paths.result_file)
    if result is not None and result_problem(result):
        result = None
    return {"status": status, "damaged": damaged, "result": result, "failed": read_failure_marker(paths)}


def summarize(data: dict[str, Any] | None, disabled: str | None = None, failed: tuple[str, str] | None = None,
              damaged: str | None = None, result: dict[str, Any] | None = None) -> dict[str, Any]:
    """The overall state of a boot: status word, exit code, errors, warnings, stage times.

    ``failed``: a failure the status file could not take (``read_failure_marker``); ``damaged``: why
    the status file is unusable, with ``result`` the boot's result record, when there is one.
    Any shape of ``data`` gives an answer (a damaged record is an error), never an exception.
    """
    if disabled:
        return {"status": "disabled", "exit_code": 0, "reason": disabled, "errors": [], "warnings": [],
                "datasource": None, "stages": {}}
    if data is not None and not damaged:
        damaged = status_problem(data)
    if damaged:
        return _from_result(result, f"the boot status (status.json) is damaged: {damaged}", failed)
    if not data:
        if failed:
            return _failed_only(failed)
        return {"status": "not started", "exit_code": 0, "errors": [], "warnings": [],
                "datasource": None, "stages": {}}
    v1 = data["v1"]
    if v1.get("disabled"):
        return summarize(None, str(v1["disabled"]))
    errors, warnings, stages = [], [], {}
    for name in STAGE_ORDER:
        record = v1.get(STAGE_KEYS[name]) or {}
        errors.extend(record.get("errors") or [])
        warnings.extend(record.get("warnings") or [])
        if record.get("start"):
            finished = record.get("finished")
            stages[name] = {
                "start": record["start"], "finished": finished,
                "seconds": round(finished - record["start"], 3) if finished else None,
                "modules": record.get("modules") or [],
            }
    if not stages and not failed and result is not None:  # emptied, yet the boot has a result: that speaks
        return _from_result(result, "the boot status (status.json) records no stage", None)
    final = v1.get(STAGE_KEYS["final"]) or {}
    crashed = [v1[STAGE_KEYS[n]].get("crashed") for n in STAGE_ORDER
               if (v1.get(STAGE_KEYS[n]) or {}).get("crashed")]
    if failed and failed[1] not in errors:
        errors.append(failed[1])
    if crashed or failed:
        status, code = "error", 1
    elif final.get("finished"):
        status, code = ("error", 1) if errors else ("degraded done", 2) if warnings else ("done", 0)
    elif stages:
        status, code = "running", 0
    else:
        status, code = "not started", 0
    datasource = v1.get("datasource")
    return {"status": status, "exit_code": code, "errors": errors, "warnings": warnings,
            "datasource": datasource if isinstance(datasource, str) else None, "stages": stages}


def _failed_only(failed: tuple[str, str]) -> dict[str, Any]:
    return {"status": "error", "exit_code": 1, "errors": [failed[1]], "warnings": [], "datasource": None,
            "stages": {}}


def _from_result(result: dict[str, Any] | None, problem: str, failed: tuple[str, str] | None) -> dict[str, Any]:
    """The verdict of ``result.json`` when the status file is damaged; an error when there is none."""
    errors = [failed[1]] if failed else []
    if result is None:
        return {"status": "error", "exit_code": 1, "errors": [*errors, problem], "warnings": [],
                "datasource": None, "stages": {}}
    v1 = result["v1"]
    errors += list(v1.get("errors") or [])
    warnings = [*(v1.get("warnings") or []), f"{problem}; the verdict is the boot's result record"]
    status, code = ("error", 1) if errors else ("degraded done", 2)
    datasource = v1.get("datasource")
    return {"status": status, "exit_code": code, "errors": errors, "warnings": warnings,
            "datasource": datasource if isinstance(datasource, str) else None, "stages": {}}
