"""What either agent says about its boot, in one shape: status word, datasource, stages, modules.

Inputs, as the lab collects them: cloudseed's ``status --format json --long`` (or its raw
``status.json``), cloud-init's raw ``/run/cloud-init/status.json`` and ``result.json``, and for
cloud-init, whose status has no module results, the module events of ``/var/log/cloud-init.log``
(read back from the guest disk). ``summarize`` gives::

    {"status", "datasource", "errors", "warnings",
     "stages": {local|network|config|final: {"seconds", "modules": [{name, status, seconds, reason}]}}}
"""

from __future__ import annotations

import re
import time
from typing import Any, Optional

STAGE_NAMES = {"init-local": "local", "init": "network", "init-network": "network",
               "modules-config": "config", "modules-final": "final"}
STAGE_ORDER = ("local", "network", "config", "final")

# cloud-init's reporting events in its log: "2026-11-24 20:00:01,123 - handlers.py[DEBUG]: finish:
# modules-config/config-ntp: SUCCESS: config-ntp ran successfully"
_EVENT = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:,(\d{3}))? - \S+\[\w+\]: (start|finish): "
                    r"(init-local|init-network|modules-config|modules-final)/config-([\w-]+): "
                    r"(?:(SUCCESS|WARN|FAIL): )?(.*)$")


def summarize(status: Any, result: Any = None, log_text: Optional[str] = None) -> dict[str, Any]:
    """The agent's own account of the boot, from whichever records are at hand."""
    out: dict[str, Any] = {"status": None, "datasource": None, "errors": [], "warnings": [], "stages": {}}
    if isinstance(status, dict) and isinstance(status.get("stages"), dict):  # cloudseed status --long
        out.update({k: status.get(k) for k in ("status", "datasource")})
        extended = status.get("extended_status")  # cloud-init 23.4+'s document: the condition is here,
        if isinstance(extended, str):              # the datasource's own spelling in detail
            out["status"] = "error" if extended.startswith("error") else extended
            out["datasource"] = status.get("detail") if status.get("datasource") else None
        out["errors"] = list(status.get("errors") or [])
        out["warnings"] = list(status.get("warnings") or [])
        for name, stage in status["stages"].items():
            if isinstance(stage, dict):
                out["stages"][name] = {"seconds": stage.get("seconds"),
                                       "modules": [m for m in stage.get("modules") or [] if isinstance(m, dict)]}
    elif isinstance(status, dict) and isinstance(status.get("v1"), dict):  # a raw status.json, either agent
        _from_raw(status["v1"], out)
    result_v1 = result.get("v1") if isinstance(result, dict) else None
    if isinstance(result_v1, dict):
        out["datasource"] = out["datasource"] or result_v1.get("datasource")
        for key in ("errors", "warnings"):
            for item in result_v1.get(key) or []:
                if item not in out[key]:
                    out[key].append(item)
        if out["status"] in (None, "running"):  # result.json is written when the boot is over
            out["status"] = "error" if out["errors"] else "degraded done" if out["warnings"] else "done"
    if log_text:
        for stage, modules in modules_from_cloud_init_log(log_text).items():
            record = out["stages"].setdefault(stage, {"seconds": None, "modules": []})
            if not record["modules"]:
                record["modules"] = modules
    ordered = [name for name in STAGE_ORDER if name in out["stages"]]
    out["stages"] = {name: out["stages"][name] for name in ordered + sorted(set(out["stages"]) - set(ordered))}
    return out


def _from_raw(v1: dict, out: dict[str, Any]) -> None:
    out["datasource"] = v1.get("datasource")
    finished_final = False
    for key, name in STAGE_NAMES.items():
        record = v1.get(key)
        if not isinstance(record, dict) or not record.get("start"):
            continue
        start, finished = record.get("start"), record.get("finished")
        seconds = round(finished - start, 3) if isinstance(finished, (int, float)) else None
        out["stages"][name] = {"seconds": seconds,
                               "modules": [m for m in record.get("modules") or [] if isinstance(m, dict)]}
        out["errors"].extend(str(e) for e in record.get("errors") or [])
        out["warnings"].extend(str(w) for w in record.get("warnings") or [])
        finished_final = finished_final or (name == "final" and seconds is not None)
    if out["errors"]:
        out["status"] = "error"
    elif finished_final:
        out["status"] = "degraded done" if out["warnings"] else "done"
    elif out["stages"]:
        out["status"] = "running"


def modules_from_cloud_init_log(text: str) -> dict[str, list[dict[str, Any]]]:
    """Each module cloud-init ran, per stage, from the start/finish events of its log (last boot only)."""
    started: dict[tuple[str, str], float] = {}
    stages: dict[str, list[dict[str, Any]]] = {}
    for line in text.splitlines():
        match = _EVENT.match(line)
        if not match:
            if "Cloud-init v. " in line and "running 'init-local'" in line:
                started.clear()
                stages = {}  # a new boot: only the last one is reported
            continue
        stamp, millis, kind, stage_key, module, verdict, message = match.groups()
        at = time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis or 0) / 1000
        stage = STAGE_NAMES[stage_key]
        if kind == "start":
            started[(stage, module)] = at
            continue
        begun = started.pop((stage, module), None)
        if verdict == "FAIL":
            status, reason = "failed", message
        elif "previously ran" in message:
            status, reason = "skipped", "already ran (frequency)"
        else:
            status, reason = "ok", "" if verdict == "SUCCESS" else message
        stages.setdefault(stage, []).append({"name": module.replace("-", "_"), "status": status,
                                             "seconds": round(at - begun, 3) if begun is not None else None,
                                             "reason": reason})
    return stages
