"""``cloudseed single --name MODULE [--frequency F] [--file F]...``: run one module now."""

from __future__ import annotations

import argparse

HELP = "run a single module now (optionally overriding its frequency)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", required=True, help="module name (write_files, write-files...)")
    from cloudseed.agent.config import FILE_HELP

    parser.add_argument("--frequency", help="per-instance, per-boot/always or per-once")
    parser.add_argument("--file", "-f", action="append", default=[], dest="files", metavar="FILE", help=FILE_HELP)


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.boot.stages import Agent
    from cloudseed.agent.config import files_for_command
    from cloudseed.agent.state import normalize_frequency
    from cloudseed.agent.state.log import setup_logging
    from cloudseed.core.root import TargetRoot

    try:
        frequency = normalize_frequency(args.frequency) if args.frequency else None
    except ValueError as e:
        print(f"cloudseed single: {e}")
        return 2
    files_cfg = files_for_command(args.files, "single")
    if files_cfg is None:
        return 1
    from cloudseed.agent.boot.lock import run_locked

    root = TargetRoot(args.root)
    setup_logging(root, args.debug, "single")
    return run_locked(root, f"single {args.name}", lambda: Agent(root, files_cfg).run_single(args.name, frequency))
