"""``cloudseed init [--local]``: the local stage (no network yet) or the network (init) stage."""

from __future__ import annotations

import argparse

HELP = "run the local stage (--local) or the network stage of the boot"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--local", action="store_true", help="the local stage: before networking starts")


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.log import setup_logging
    from cloudseed.agent.stages import BootState, run_local, run_network
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(args.root)
    setup_logging(root, args.debug, "local" if args.local else "network")
    state = BootState.load(root)
    return run_local(state) if args.local else run_network(state)
