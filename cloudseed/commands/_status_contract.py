"""cloud-init's status contract: the JSON/YAML of ``status --format`` and the exit-code rule.

The document has cloud-init 23.4+'s keys with their meanings (checked against cloud-init 26.2's
own code reading the same files, ``tests/compat/test_status_reference.py``):

``status``            not started | running | done | disabled | error (an error wins)
``extended_status``   the same with the condition: ``degraded done``, ``degraded running``,
                      ``error - done``, ``error - running``
``boot_status_code``  why the agent runs or not: enabled-by-generator, disabled-by-generator,
                      disabled-by-marker-file, disabled-by-kernel-command-line,
                      enabled-by-kernel-command-line, unknown
``datasource``        lower case, without "DataSource" (``nocloud``)
``detail``            the datasource, else the stage running, else why
``errors``            every stage's errors
``recoverable_errors`` ``{"WARNING": [...], "DEPRECATED": [...]}``: what made the boot degraded
``last_update``       the latest stage start or finish, ``Thu, 27 Nov 2026 08:00:00 +0000``

and, as cloud-init's, every other key of the status record: each stage's record (``init-local``,
``init``, ``modules-config``, ``modules-final``), ``stage``... cloudseed's own keys stay beside
them: ``warnings``, ``stages`` (with ``--long``: per-stage seconds and module results),
``exit_code``, ``reason``.

**Exit codes.** 0 done, 1 error; a degraded boot (done with warnings or deprecations) exits 2
under cloud-init 23.4+'s rule and 0 under 22.4's. Which rule is the image's setting
``status_exit_codes: "22.4" | "23.4"`` (system configuration only; default 23.4); the Debian
package writes it to match the cloud-init it replaces (docs/drop-in.md). The configuration is
read only when the boot is degraded, so ``status`` stays cheap.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RULES = ("22.4", "23.4")
SETTING = "status_exit_codes"


def boot_status_code(root: Any, paths: Any, cmdline: str) -> tuple[str, str]:
    """(cloud-init's boot status code, its description)."""
    tokens = cmdline.split()
    if "cloud-init=enabled" in tokens or "cloudseed=enabled" in tokens:
        return "enabled-by-kernel-command-line", "enabled by the kernel command line"
    for marker in ("/etc/cloudseed/disabled", "/etc/cloud/cloud-init.disabled"):
        if root.exists(marker):
            return "disabled-by-marker-file", f"disabled by {marker}"
    for token in ("cloudseed=disabled", "cloud-init=disabled"):
        if token in tokens:
            return "disabled-by-kernel-command-line", f"disabled by kernel parameter {token}"
    if root.exists(paths.run("disabled")):
        return "disabled-by-generator", "disabled by the systemd generator"
    if root.exists(paths.run("enabled")):
        return "enabled-by-generator", "enabled by the systemd generator"
    return "unknown", "the systemd generator may not have run yet"


def document(summary: dict, v1: dict, code: tuple[str, str], long: bool) -> dict[str, Any]:
    """The status document (cloud-init's keys, then cloudseed's) for ``summary`` (``status.summarize``).

    Errors and recoverable errors are gathered over the stage records in the order cloud-init
    reads them (by key), and every other key of the record (``stage``...) is shown as cloud-init
    shows it, so its own code reading the same files prints the same document."""
    from cloudseed.agent.state.status import recoverable

    word = summary["status"]
    running = {"disabled": "disabled", "not started": "not started", "running": "running"}.get(word, "done")
    errors: list[str] = []
    problems: dict[str, list[str]] = {}
    for _key, record in sorted(v1.items()):
        if isinstance(record, dict):
            errors.extend(record.get("errors") or [])
            kept = record.get("recoverable_errors")
            for level, items in (kept if isinstance(kept, dict) else recoverable(record.get("warnings") or [])).items():
                problems.setdefault(level, []).extend(items)
    errors += [e for e in summary.get("errors") or [] if e not in errors]  # found by the reader (agent gone)
    known = {w for items in problems.values() for w in items}
    found = [w for w in summary.get("warnings") or [] if w not in known]  # the reader's (a damaged record)
    if found:
        problems.setdefault("WARNING", []).extend(found)
    if word == "disabled":
        errors, problems = [], {}
    if errors or word == "error":
        status, extended = "error", f"error - {running}"
    elif problems and running in ("done", "running"):
        status, extended = running, f"degraded {running}"
    else:
        status, extended = running, running
    name = v1.get("datasource") or ""
    stage = v1.get("stage")
    detail = name if name else (f"Running in stage: {stage}" if stage else summary.get("reason") or code[1])
    latest = max([t for record in v1.values() if isinstance(record, dict)
                  for t in (record.get("start"), record.get("finished")) if isinstance(t, (int, float))] or [0])
    out: dict[str, Any] = {k: v for k, v in v1.items() if k != "datasource"}
    out.update({
        "boot_status_code": code[0], "datasource": name.lower().replace("datasource", ""), "detail": detail,
        "errors": errors, "extended_status": extended,
        "last_update": time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(latest)) if latest else "",
        "recoverable_errors": problems, "status": status,
    })
    out["warnings"] = list(summary.get("warnings") or [])
    out["exit_code"] = 1 if status == "error" else 2 if extended.startswith("degraded") else 0  # 23.4+'s rule
    if long:
        out["stages"] = summary.get("stages", {})
    if summary.get("reason"):
        out["reason"] = summary["reason"]
    return out


def rule(root: Any, cmdline: str) -> str:
    """The exit-code rule the image's configuration chooses (``status_exit_codes``), default 23.4."""
    from cloudseed.agent.config import load_system_config

    value = str(load_system_config(root, cmdline).get(SETTING, "23.4")).strip()
    return value if value in RULES else "23.4"


def exit_code(document: dict, root: Any, cmdline: str) -> int:
    """cloud-init's: 1 for an error (even while running), 2 when degraded under 23.4+'s rule (0 under
    22.4's, which knew no degraded state), else 0."""
    if document["status"] == "error":
        return 1
    if document["extended_status"].startswith("degraded"):
        return 0 if rule(root, cmdline) == "22.4" else 2
    return 0
