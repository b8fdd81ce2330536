"""``cloudseed status [--wait] [--long] [--format json|yaml|tabular]``: how the boot went.

Exit 0 when done (or disabled), 1 on an error, 2 when done with warnings (degraded) under
cloud-init 23.4+'s rule, 0 under 22.4's (the image's ``status_exit_codes``). ``--format json``
and ``yaml`` print cloud-init 23.4+'s status document (``_status_contract.py``). ``--wait``
returns when the final stage is done or a stage failed, and at once when the agent is disabled
or not set to run on this boot. Kept cheap to start: nothing heavy imported.
"""

from __future__ import annotations

import argparse
import json
import os
import time

HELP = "show the boot status (exit 0 done, 1 error, 2 degraded)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", "-w", action="store_true", help="wait until the agent has finished")
    parser.add_argument("--long", "-l", action="store_true", help="stages, modules, errors and warnings")
    parser.add_argument("--format", choices=("tabular", "json", "yaml"), default="tabular")


def _summary(root, paths) -> dict:
    from cloudseed.agent.config import is_disabled, read_cmdline
    from cloudseed.agent.state.status import load_for_reading, summarize

    disabled = is_disabled(root, read_cmdline(root))
    if disabled is None and root.isfile(paths.run("disabled")):
        try:
            disabled = root.read_text(paths.run("disabled")).strip() or "disabled by the generator"
        except OSError:
            disabled = "disabled by the generator"
    found = load_for_reading(paths)
    summary = summarize(found["status"], disabled, found["failed"], found["damaged"], found["result"])
    summary["_v1"] = (found["status"] or {}).get("v1") or {}  # checked: any shape of the file is answered
    return summary


def _stage_process_gone(root, paths) -> bool:
    """On the live system: a stage is marked running but no agent process is left."""
    from cloudseed.agent.state import read_json

    data = read_json(root, paths.status_file)
    v1 = data.get("v1") if isinstance(data, dict) else None
    if not isinstance(v1, dict):
        return False
    pid = v1.get("pid")
    if not root.is_live or not pid or v1.get("stage") is None:
        return False  # between stages no process is expected: systemd starts the next one
    try:
        os.kill(int(pid), 0)
        return False
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError, TypeError, OverflowError):
        return False


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.state import Paths
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(args.root)
    paths = Paths(root)
    summary = _summary(root, paths)
    if args.wait:
        expected = root.exists(paths.run("enabled")) or root.exists(paths.status_file)
        gone_since = None
        while summary["status"] in ("running", "not started") and (expected or summary["status"] == "running"):
            if args.format == "tabular":
                print(".", end="", flush=True)
            time.sleep(0.25)
            summary = _summary(root, paths)
            expected = expected or root.exists(paths.status_file)
            if summary["status"] == "running" and _stage_process_gone(root, paths):
                gone_since = gone_since or time.monotonic()
                if time.monotonic() - gone_since > 5:
                    summary.update(status="error", exit_code=1,
                                   errors=summary["errors"] + ["the agent stopped before finishing"])
            else:
                gone_since = None
        if args.format == "tabular":
            print()
    from cloudseed.agent.config import read_cmdline
    from cloudseed.commands import _status_contract

    cmdline = read_cmdline(root)
    v1 = summary.pop("_v1")
    document = _status_contract.document(summary, v1, _status_contract.boot_status_code(root, paths, cmdline),
                                         args.long)
    _print(summary, document, args)
    return _status_contract.exit_code(document, root, cmdline)


def _print(summary: dict, document: dict, args: argparse.Namespace) -> None:
    if args.format == "json":
        print(json.dumps(document, indent=2, sort_keys=True))
        return
    if args.format == "yaml":
        import yaml

        print(yaml.safe_dump(document, sort_keys=True), end="")
        return
    print(f"status: {document['status']}")
    if summary.get("reason"):
        print(f"reason: {summary['reason']}")
    if args.long:
        print(f"extended_status: {document['extended_status']}")
        print(f"boot_status_code: {document['boot_status_code']}")
        if document["last_update"]:
            print(f"last_update: {document['last_update']}")
        print(f"detail: {document['detail']}")
    if not args.long:
        for error in summary["errors"][:3]:
            print(f"error: {error}")
        if len(summary["errors"]) > 3:
            print(f"... {len(summary['errors']) - 3} more errors (--long)")
        return
    print(f"datasource: {summary.get('datasource') or '-'}")
    for name, stage in summary.get("stages", {}).items():
        seconds = f"{stage['seconds']:.3f}s" if stage.get("seconds") is not None else "running"
        print(f"stage {name}: {seconds}")
        for module in stage.get("modules", []):
            if module["status"] == "skipped" and module.get("reason") == "no configuration for it":
                continue
            reason = f" ({module['reason']})" if module.get("reason") else ""
            print(f"  {module['name']}: {module['status']}{reason} {module.get('seconds', 0):.3f}s")
    for error in summary["errors"]:
        print(f"error: {error}")
    for warning in summary["warnings"]:
        print(f"warning: {warning}")

