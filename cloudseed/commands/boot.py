"""``cloudseed boot [--hand-off]``: all four stages in one process.

Plain: one after the other, at once (images without systemd, tests, an offline root).
``--hand-off``: what ``cloudseed-local.service`` runs at boot: the local stage, then each later
stage when its own unit asks for it, so the stages keep their places in the boot order while
the interpreter starts only once (see ``cloudseed.agent.boot.handoff``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # argparse is not imported at boot: ``cli._boot_unit_args`` reads the unit's command line
if TYPE_CHECKING:
    import argparse

HELP = "run all four boot stages in one process"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hand-off", action="store_true",
                        help="run each stage after the local one when its systemd unit asks for it")


def run(args: argparse.Namespace) -> int:
    from cloudseed.agent.boot.lock import run_locked
    from cloudseed.agent.boot.stages import BootState, run_all, run_handed_off
    from cloudseed.agent.state.log import setup_logging
    from cloudseed.core.root import TargetRoot

    root = TargetRoot(args.root)
    setup_logging(root, args.debug, "boot")

    def boot() -> int:  # the lock is held for the whole boot: no other agent runs between its stages
        state = BootState.load_for(root, "local")
        if state is None:
            return 1
        return run_handed_off(state) if args.hand_off else run_all(state)

    return run_locked(root, "boot", boot)
