"""``cloudseed instances provisioning [ID]``: what instances' agents reported about their boots.

Without an ID, every instance with its provisioning state (``--state`` keeps one, ``--contains``
filters by id, name or hostname); with one, its state, the time of each, and the reports of its
latest boot (``--boot N`` another) as a timeline; ``--follow`` goes on printing reports as they
arrive until the boot ends (done, degraded or failed). ``--json`` prints what the admin API
answers. The registry is read directly (``provider/registry/provisioning.py``).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

STATES = ("pending", "provisioning", "done", "degraded", "failed")


def configure(sub: Any) -> None:
    parser = sub.add_parser("provisioning", help="instances' provisioning state and boot timeline, as their "
                                                 "agents reported them (see docs/metadata-server.md)")
    parser.add_argument("instance_id", nargs="?", help="one instance (default: every instance's state)")
    parser.add_argument("--state", choices=STATES, help="only instances in this state")
    parser.add_argument("--contains", default="", metavar="TEXT", help="only instances whose id, name or "
                                                                       "hostname contain TEXT")
    parser.add_argument("--boot", type=int, help="this boot's reports (default: the latest)")
    parser.add_argument("--follow", "-f", action="store_true", help="print reports as they arrive until the "
                                                                    "boot ends")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _when(epoch: Any) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(epoch)) + "Z" if epoch else "-"


def _line(report: dict[str, Any], origin: float) -> str:
    offset = report["timestamp"] - origin
    if report["event_type"] == "start":
        return f"{offset:8.3f}s  start   {report['name']}"
    duration = f" ({report['duration']:.3f}s)" if report.get("duration") is not None else ""
    text = f": {report['description']}" if report.get("description") and report["result"] != "SUCCESS" else ""
    return f"{offset:8.3f}s  {report['result'].lower():7} {report['name']}{duration}{text}"


def run(registry: Any, args: argparse.Namespace) -> int:
    import sys

    if not args.instance_id:
        entries = registry.provisioning_list(state=args.state, contains=args.contains)
        if args.json:
            print(json.dumps({"instances": entries}, indent=1))
            return 0
        for entry in entries:
            failure = entry.get("failure") or {}
            problem = f"{failure['name']}: {failure['message']}" if failure else ""
            print(f"{entry['instance_id']:24} {entry['state']:12} {entry.get('datasource') or '-':12} "
                  f"{_when(entry['times'].get(entry['state'])):10} {problem}".rstrip())
        return 0
    state = registry.provisioning(args.instance_id)
    if state is None:
        print(f"cloudseed instances provisioning: no instance {args.instance_id}", file=sys.stderr)
        return 1
    boot = args.boot if args.boot is not None else state["boot"]
    reports = registry.provisioning_reports(args.instance_id, 0, boot)
    if args.json:
        print(json.dumps({"instance_id": args.instance_id, "provisioning": state, "reports": reports}, indent=1))
        return 0
    print(f"{args.instance_id}: {state['state']} (boot {boot}, datasource {state.get('datasource') or '-'}"
          + (f", {state['boot_seconds']:.3f}s" if state.get("boot_seconds") is not None else "") + ")")
    print("  " + ", ".join(f"{name} {_when(state['times'][name])}" for name in STATES if state["times"].get(name)))
    if state.get("failure"):
        print(f"  failed: {state['failure']['name']}: {state['failure']['message']}")
    origin = reports[0]["timestamp"] if reports else 0.0
    for report in reports:
        print(_line(report, origin))
    last = reports[-1]["seq"] if reports else 0
    while args.follow and state["state"] in ("pending", "provisioning"):
        time.sleep(0.25)
        for report in registry.provisioning_reports(args.instance_id, last):
            origin = origin or report["timestamp"]
            print(_line(report, origin), flush=True)
            last = report["seq"]
        state = registry.provisioning(args.instance_id) or state
    if args.follow:
        print(f"{args.instance_id}: {state['state']}")
    return 1 if state["state"] == "failed" else 0
