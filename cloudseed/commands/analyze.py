"""``cloudseed analyze [show|blame]``: where this boot's agent time went, from the status record."""

from __future__ import annotations

import argparse

HELP = "show stage and module timings of this boot (show, blame)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="?", choices=("show", "blame"), default="show")


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.state import Paths, read_json
    from cloudseed.agent.state.status import summarize
    from cloudseed.core.root import TargetRoot

    paths = Paths(TargetRoot(args.root))
    summary = summarize(read_json(paths.root, paths.status_file))
    if not summary["stages"]:
        print("cloudseed analyze: no boot record yet")
        return 1
    if args.what == "blame":
        rows = [(m.get("seconds", 0.0), f"{stage}/{m['name']}")
                for stage, record in summary["stages"].items() for m in record["modules"]
                if m["status"] != "skipped"]
        for seconds, name in sorted(rows, reverse=True):
            print(f"{seconds:9.3f}s  {name}")
        return 0
    total = 0.0
    for stage, record in summary["stages"].items():
        seconds = record.get("seconds") or 0.0
        total += seconds
        print(f"{stage:8s} {seconds:8.3f}s")
        for m in record["modules"]:
            if m["status"] != "skipped":
                print(f"  {m['name']:28s} {m.get('seconds', 0.0):8.3f}s {m['status']}")
    print(f"{'total':8s} {total:8.3f}s")
    return 0
