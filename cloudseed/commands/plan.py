"""``cloudseed plan [--user-data FILE] [--json]``: what a cloud-config would change on an image, unchanged.

With ``--root DIR`` (a mounted image) or on this system: the image's configuration, then the
user-data (``FILE``; default the image's NoCloud seed, when it has one), merged as at a boot, and
the changes the modules would make listed by kind: files, users, groups, packages, services,
mounts, commands (counted, never run), and problems (keys the schema refuses or cloudseed does
not do here). Nothing is written and nothing is run; ``#include`` URLs are not fetched. Exit 0,
or 1 when the user-data has errors. See ``cloudseed/agent/plan.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HELP = "show what a cloud-config would change on an image (files, users, packages...) without changing it"
SEED = "/var/lib/cloud/seed/nocloud/user-data"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user-data", metavar="FILE", help="the user-data to plan (default: the image's NoCloud "
                                                            "seed, else the image's configuration alone)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.config import load_system_config, merge_config
    from cloudseed.agent.config.schema import validate_config
    from cloudseed.agent.distros import read_os_release
    from cloudseed.agent.plan import KINDS, plan
    from cloudseed.agent.userdata import process_userdata
    from cloudseed.core.root import TargetRoot

    if not os.path.isdir(args.root):
        print(f"cloudseed plan: --root {args.root}: no such directory", file=sys.stderr)
        return 1
    root = TargetRoot(args.root)
    problems: list[str] = []
    system = load_system_config(root, errors=problems)
    if args.user_data:
        try:
            with open(args.user_data, "rb") as handle:
                blob = handle.read()
        except OSError as e:
            print(f"cloudseed plan: cannot read {args.user_data}: {e.strerror}", file=sys.stderr)
            return 1
        source = args.user_data
    else:
        blob = root.read_bytes(SEED) if root.isfile(SEED) else b""
        source = f"{args.root.rstrip('/')}{SEED}" if blob else "(none: the image's configuration alone)"
    processed = process_userdata(blob, allow_includes=False, root=root)
    user_cfg = processed.cloud_config if isinstance(processed.cloud_config, dict) else {}
    problems += [f"user-data: {e}" for e in processed.errors]
    problems += [str(p) for p in validate_config(user_cfg, os_release=read_os_release(root), show_values=False)]
    changes = plan(root, merge_config(system, user_cfg))
    changes["problems"] = problems + changes["problems"]
    if processed.scripts:
        changes["commands"].append({"key": "user scripts", "count": len(processed.scripts),
                                    "when": "once, in the final stage", "note": "not run by plan"})
    if args.json:
        print(json.dumps({"root": args.root, "user_data": source, **changes}, indent=1))
    else:
        print(f"plan for {args.root} with {source}")
        for kind in KINDS:
            entries = changes[kind]
            print(f"{kind}: {'none' if not entries else len(entries)}")
            for entry in entries:
                print(f"  - {_line(entry)}")
    return 1 if processed.errors else 0


def _line(entry) -> str:
    if isinstance(entry, str):
        return entry
    head = entry.get("path") or entry.get("name") or entry.get("device") or entry.get("key")
    rest = ", ".join(f"{k}: {v}" for k, v in entry.items() if k not in ("path", "name", "device", "key"))
    return f"{head}: {rest}"
