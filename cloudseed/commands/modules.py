"""``cloudseed modules --mode config|final``: run the config or the final stage's modules."""

from __future__ import annotations

import argparse

HELP = "run the config or final stage's modules"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=("config", "final"), required=True, help="which stage")


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.log import setup_logging
    from cloudseed.agent.stages import BootState, run_modules
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(args.root)
    setup_logging(root, args.debug, args.mode)
    return run_modules(BootState.load(root), args.mode)
