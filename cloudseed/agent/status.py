"""Boot status: ``/run/cloudseed/status.json`` while stages run, ``result.json`` when done.

The layout follows cloud-init's (``v1`` with one record per stage: ``init-local``, ``init``,
``modules-config``, ``modules-final``), so scripts written against it keep working; each
record also lists the module results and warnings.
"""

from __future__ import annotations

import os
import time

from cloudseed.agent import compat_paths
from cloudseed.agent.state import Paths, read_json, write_json

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any

STAGE_KEYS = {"local": "init-local", "network": "init", "config": "modules-config", "final": "modules-final"}
STAGE_ORDER = ("local", "network", "config", "final")


class StatusRecorder:
    """Reads, updates and writes the boot status of one root."""

    def __init__(self, paths: Paths):
        self.paths = paths
        loaded = read_json(paths.root, paths.status_file)
        self.data: dict[str, Any] = loaded if isinstance(loaded, dict) and "v1" in loaded else self._empty()

    @staticmethod
    def _empty() -> dict[str, Any]:
        v1: dict[str, Any] = {"datasource": None, "stage": None}
        for key in STAGE_KEYS.values():
            v1[key] = {"start": None, "finished": None, "errors": [], "warnings": [], "modules": []}
        return {"v1": v1}

    @property
    def v1(self) -> dict[str, Any]:
        return self.data["v1"]

    def save(self) -> None:
        write_json(self.paths.root, self.paths.status_file, self.data)
        compat_paths.publish(self.paths, self.data)  # cloud-init's paths, for the tools that poll them

    def start(self, stage: str) -> None:
        self._close_abandoned(stage)
        record = self.v1[STAGE_KEYS[stage]]
        record.update({"start": time.time(), "finished": None, "errors": [], "warnings": [], "modules": []})
        self.v1["stage"] = STAGE_KEYS[stage]
        self.v1["pid"] = os.getpid()
        self.save()

    def finish(self, stage: str, errors: list[str], warnings: list[str], modules: list[dict],
               datasource: str | None) -> None:
        record = self.v1[STAGE_KEYS[stage]]
        record.update({"finished": time.time(), "errors": errors, "warnings": warnings, "modules": modules,
                       "recoverable_errors": recoverable(warnings)})  # cloud-init 23.4+ reads this key
        if datasource:
            self.v1["datasource"] = datasource
        self.v1["stage"] = None
        self.save()
        if stage == "final" or errors:
            self.write_result()

    def write_result(self) -> None:
        errors = [e for key in STAGE_KEYS.values() for e in self.v1[key]["errors"]]
        warnings = [w for key in STAGE_KEYS.values() for w in self.v1[key].get("warnings", [])]
        write_json(self.paths.root, self.paths.result_file,
                   {"v1": {"datasource": self.v1.get("datasource"), "errors": errors, "warnings": warnings}})
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
        """A stage itself failed (not one of its modules): waiting for the boot is over."""
        record = self.v1[STAGE_KEYS[stage]]
        record["crashed"] = message
        record["errors"] = [*record.get("errors", []), message]
        record["finished"] = time.time()
        self.v1["stage"] = None
        self.save()
        self.write_result()

    def mark_disabled(self, reason: str) -> None:
        self.v1["disabled"] = reason
        self.save()


def recoverable(warnings: list[str]) -> dict[str, list[str]]:
    """cloud-init 23.4+'s ``recoverable_errors`` of a stage's warnings: deprecation notes apart."""
    out: dict[str, list[str]] = {}
    for text in warnings:
        level = "DEPRECATED" if ": deprecated" in text or text.startswith("deprecated") else "WARNING"
        out.setdefault(level, []).append(text)
    return out


def summarize(data: dict[str, Any] | None, disabled: str | None = None) -> dict[str, Any]:
    """The overall state of a boot: status word, exit code, errors, warnings, stage times."""
    if disabled:
        return {"status": "disabled", "exit_code": 0, "reason": disabled, "errors": [], "warnings": [],
                "datasource": None, "stages": {}}
    if not data or "v1" not in data:
        return {"status": "not started", "exit_code": 0, "errors": [], "warnings": [],
                "datasource": None, "stages": {}}
    v1 = data["v1"]
    if v1.get("disabled"):
        return summarize(None, v1["disabled"])
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
    final = v1.get(STAGE_KEYS["final"]) or {}
    crashed = [v1[STAGE_KEYS[n]].get("crashed") for n in STAGE_ORDER
               if (v1.get(STAGE_KEYS[n]) or {}).get("crashed")]
    if crashed:
        status, code = "error", 1
    elif final.get("finished"):
        status, code = ("error", 1) if errors else ("degraded done", 2) if warnings else ("done", 0)
    elif stages:
        status, code = "running", 0
    else:
        status, code = "not started", 0
    return {"status": status, "exit_code": code, "errors": errors, "warnings": warnings,
            "datasource": v1.get("datasource"), "stages": stages}
