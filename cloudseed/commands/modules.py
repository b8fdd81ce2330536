"""``cloudseed modules --mode config|final [--file F]...``: run the config or the final stage's modules."""

from __future__ import annotations

import argparse

HELP = "run the config or final stage's modules"


def configure(parser: argparse.ArgumentParser) -> None:
    from cloudseed.agent.config import FILE_HELP

    parser.add_argument("--mode", choices=("config", "final"), required=True, help="which stage")
    parser.add_argument("--file", "-f", action="append", default=[], dest="files", metavar="FILE", help=FILE_HELP)


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.boot.lock import run_locked
    from cloudseed.agent.boot.stages import BootState, run_own_stage
    from cloudseed.agent.config import files_for_command
    from cloudseed.agent.state.log import setup_logging
    from cloudseed.core.root import TargetRoot

    files_cfg = files_for_command(args.files, "modules")
    if files_cfg is None:
        return 1
    root = TargetRoot(args.root)
    setup_logging(root, args.debug, args.mode)

    def run_stage() -> int:
        state = BootState.load_for(root, args.mode, files_cfg)
        return 1 if state is None else run_own_stage(state, args.mode)

    return run_locked(root, f"{args.mode} stage", run_stage)
