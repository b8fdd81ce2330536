"""``cloudseed init [--local] [--file F]...``: the local stage (no network yet) or the network (init) stage."""

from __future__ import annotations

import argparse

HELP = "run the local stage (--local) or the network stage of the boot"


def configure(parser: argparse.ArgumentParser) -> None:
    from cloudseed.agent.config import FILE_HELP

    parser.add_argument("--local", action="store_true", help="the local stage: before networking starts")
    parser.add_argument("--file", "-f", action="append", default=[], dest="files", metavar="FILE", help=FILE_HELP)


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.boot.lock import run_locked
    from cloudseed.agent.boot.stages import BootState, run_own_stage
    from cloudseed.agent.config import files_for_command
    from cloudseed.agent.state.log import setup_logging
    from cloudseed.core.root import TargetRoot

    files_cfg = files_for_command(args.files, "init")
    if files_cfg is None:
        return 1
    root = TargetRoot(args.root)
    stage = "local" if args.local else "network"
    setup_logging(root, args.debug, stage)

    def run_stage() -> int:
        state = BootState.load_for(root, stage, files_cfg)
        return 1 if state is None else run_own_stage(state, stage)

    return run_locked(root, f"{stage} stage", run_stage)
