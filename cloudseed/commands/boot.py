"""``cloudseed boot``: all four stages in one process (the fast path for images that want it)."""

from __future__ import annotations

import argparse

HELP = "run all four boot stages in one process"


def configure(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.log import setup_logging
    from cloudseed.agent.stages import BootState, run_all
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(args.root)
    setup_logging(root, args.debug, "boot")
    return run_all(BootState.load(root))
