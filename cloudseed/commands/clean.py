"""``cloudseed clean [--logs] [--seed] [--reboot]``: forget this instance so the next boot is a first boot."""

from __future__ import annotations

import argparse

HELP = "remove agent state so the next boot runs as a new instance"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--logs", "-l", action="store_true", help="also remove the agent's logs")
    parser.add_argument("--seed", "-s", action="store_true", help="also remove seed directories")
    parser.add_argument("--reboot", "-r", action="store_true", help="reboot afterwards")


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.scripts import OUTPUT_LOG
    from cloudseed.agent.state import DATA_DIR, LOG_FILE, RUN_DIR
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(args.root)
    removed = []
    for name in root.listdir(DATA_DIR):
        if name == "seed" and not args.seed:
            continue
        root.remove_tree(f"{DATA_DIR}/{name}")
        removed.append(f"{DATA_DIR}/{name}")
    for name in root.listdir(RUN_DIR):
        if name not in ("enabled", "disabled"):
            root.remove_tree(f"{RUN_DIR}/{name}")
    if args.logs:
        for log in (LOG_FILE, OUTPUT_LOG):
            if root.remove(log):
                removed.append(log)
    print(f"cloudseed clean: removed {len(removed)} item(s)")
    if args.reboot:
        if not root.is_live:
            print("cloudseed clean: --reboot ignored for an offline root")
            return 0
        root.run(["shutdown", "-r", "now"], check=False)
    return 0
