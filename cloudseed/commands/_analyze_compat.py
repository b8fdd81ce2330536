"""``cloud-init analyze dump`` and ``analyze boot``, from cloudseed's boot status record.

``dump``: the boot's events as cloud-init lists them (JSON: one ``start`` and one ``finish`` event
per stage, a ``finish`` per module run, each with ``name``, ``description``, ``origin``,
``timestamp`` and, for finishes, ``result``). ``boot``: when the kernel started, when userspace
started (systemd's record) and when the agent started. Not a verb (the leading ``_``): used by
``cloud_init.py`` only.
"""

from __future__ import annotations

import json
import sys
import time

STAGE_NAMES = {"local": "init-local", "network": "init-network", "config": "modules-config",
               "final": "modules-final"}


def events(summary: dict) -> list[dict]:
    out: list[dict] = []
    for stage, record in summary.get("stages", {}).items():
        name = STAGE_NAMES.get(stage, stage)
        out.append({"description": f"running stage {stage}", "event_type": "start", "name": name,
                    "origin": "cloudseed", "timestamp": record["start"]})
        clock = record["start"]
        for module in record.get("modules", []):
            clock += module.get("seconds") or 0.0
            result = {"failed": "FAIL", "skipped": "SKIP"}.get(module.get("status"), "SUCCESS")
            out.append({"description": f"{module['name']}: {module.get('status')}", "event_type": "finish",
                        "name": f"{name}/config-{module['name']}", "origin": "cloudseed",
                        "result": result, "timestamp": round(clock, 6)})
        if record.get("finished"):
            out.append({"description": f"stage {stage} finished", "event_type": "finish", "name": name,
                        "origin": "cloudseed", "result": "SUCCESS", "timestamp": record["finished"]})
    return out


def _summary(root) -> dict:
    from cloudseed.agent.state import Paths, read_json
    from cloudseed.agent.state.status import summarize

    paths = Paths(root)
    return summarize(read_json(root, paths.status_file))


def _out(text: str, outfile: str) -> None:
    if outfile in ("-", ""):
        sys.stdout.write(text)
    else:
        with open(outfile, "w", encoding="utf-8") as f:
            f.write(text)


def dump(root, outfile: str = "-") -> int:
    summary = _summary(root)
    if not summary["stages"]:
        print("analyze dump: no boot record yet", file=sys.stderr)
        return 1
    _out(json.dumps(events(summary), indent=1, sort_keys=True) + "\n", outfile)
    return 0


def _stamp(epoch: float) -> str:
    return time.strftime("%a, %d %b %Y %H:%M:%S", time.gmtime(epoch)) + f".{int(epoch * 1e6) % 1000000:06d} +0000"


def boot(root, outfile: str = "-") -> int:
    summary = _summary(root)
    local = summary["stages"].get("local") or next(iter(summary["stages"].values()), None)
    lines = ["-- Most Recent Boot Record --"]
    if root.is_live:
        from cloudseed.agent.state import uptime_seconds

        uptime = uptime_seconds()
        if uptime is not None:
            kernel_start = time.time() - uptime
            lines.append(f"    Kernel Started at: {_stamp(kernel_start)}")
            userspace = _userspace_seconds(root)
            if userspace is not None:
                lines.append(f"    Kernel ended boot at: {_stamp(kernel_start + userspace)}")
                lines.append(f"    Kernel time to boot (seconds): {userspace:.6f}")
                if local:
                    lines.append(f"    Cloud-init activated by systemd at: {_stamp(local['start'])}")
                    lines.append("    Time between Kernel end boot and Cloud-init activation (seconds): "
                                 f"{local['start'] - kernel_start - userspace:.6f}")
    if not local:
        lines.append("    Cloud-init start: (the agent has not run this boot)")
        _out("\n".join(lines) + "\n", outfile)
        return 1
    lines.append(f"    Cloud-init start: {_stamp(local['start'])}")
    _out("\n".join(lines) + "\n", outfile)
    return 0


def _userspace_seconds(root) -> float | None:
    if not root.which("systemctl"):
        return None
    result = root.run(["systemctl", "show", "-p", "UserspaceTimestampMonotonic"], check=False)
    try:
        return int(result.stdout.strip().split("=", 1)[1]) / 1e6
    except (IndexError, ValueError):
        return None
