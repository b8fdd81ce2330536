"""The ``cloudseed`` command line: global flags, then one verb, each verb one file in ``commands/``.

Only the chosen verb's module is imported, so ``cloudseed status`` stays cheap at boot.
A verb is a file ``commands/<verb>.py`` defining ``HELP`` (one line), ``configure(parser)`` and
``run(args) -> int``; the verbs are found from the files (the contract: ``commands/_contract.py``).
"""

from __future__ import annotations

import importlib
import os
import sys

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    import argparse
    from typing import Any, Sequence


COMMANDS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "commands")


def verb_names() -> list[str]:
    """Every verb: one file each in ``cloudseed/commands`` (none of them imported)."""
    names = {n.rsplit(".", 1)[0] for n in os.listdir(COMMANDS_DIR) if n.endswith((".py", ".pyc"))}
    return sorted(n for n in names if n.isidentifier() and not n.startswith("_"))


def _global_parser(add_help: bool) -> argparse.ArgumentParser:
    import argparse  # not at the top: the boot's command line is read without it (``_boot_unit_args``)

    parser = argparse.ArgumentParser(
        prog="cloudseed", add_help=add_help,
        description="Cloud instance initialisation: agent, metadata server, seed builder, VM lab.",
    )
    parser.add_argument("--root", default="/", metavar="DIR",
                        help="apply every change under DIR instead of / (offline images, tests)")
    parser.add_argument("--debug", action="count", default=0,
                        help="log debug messages to stderr (twice: trace messages too)")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    unit_args = _boot_unit_args(argv)
    if unit_args is not None:
        return _run(importlib.import_module("cloudseed.commands.boot"), unit_args, "boot", "/")
    parsed = parse_command_line(argv)
    if isinstance(parsed, int):
        return parsed
    module, args, verb, root = parsed
    return _run(module, args, verb, root)


def parse_command_line(argv: list[str]) -> tuple[Any, argparse.Namespace, str, str] | int:
    """The verb's module, the parsed arguments, the verb and the global ``--root`` (argparse), or
    the exit code when there is nothing to run (``--version``, help)."""
    pre = _global_parser(add_help=False)
    known, rest = pre.parse_known_args(argv)
    if known.version:
        from cloudseed import __version__

        print(f"cloudseed {__version__}")
        return 0
    verb = next((a for a in rest if not a.startswith("-")), None)
    verbs = verb_names()
    if (verb or "").replace("-", "_") not in verbs:  # `hotplug-hook` is commands/hotplug_hook.py
        parser = _global_parser(add_help=True)
        sub = parser.add_subparsers(dest="verb", metavar="COMMAND")
        for name in verbs:
            sub.add_parser(name.replace("_", "-"), help=_help_of(name))  # as users type them
        if verb is None:
            parser.print_help()
            return 0 if "-h" in rest or "--help" in rest else 2
        parser.error(f"unknown command {verb!r}")
    module = importlib.import_module(f"cloudseed.commands.{verb.replace('-', '_')}")
    parser = _global_parser(add_help=True)
    sub = parser.add_subparsers(dest="verb", metavar="COMMAND")
    verb_parser = sub.add_parser(verb, help=module.HELP, description=module.HELP)
    module.configure(verb_parser)
    _accept_global_options_after(verb_parser)
    return module, parser.parse_args(argv), verb, known.root


def _run(module: Any, args: Any, verb: str, root: str) -> int:
    """The verb's ``run(args)``, its exit code; the errors every verb shares, each in one line. A run
    on another root than / ends when nothing it started still holds that root."""
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except ModuleNotFoundError as e:  # a library this verb needs is not installed: one line, no traceback
        if args.debug:
            raise
        print(f"cloudseed {verb}: {missing_library(e)}", file=sys.stderr)
        return 1
    finally:
        if root != "/":
            _wait_for_background_commands()


# The command lines of the boot's agent process (cloudseed-local.service's ExecStart, and the same
# without the units), which ``_boot_unit_args`` reads without argparse.
BOOT_UNIT_COMMAND_LINES = (["boot", "--hand-off"], ["boot"])


def _boot_unit_args(argv: list[str]) -> Any:
    """The arguments argparse would give for ``cloudseed boot [--hand-off]`` exactly, read without it.

    argparse, and what it imports when a parser is built (gettext, locale, shutil with bz2 and
    lzma), is about 10 ms natively and about 70 ms of the lab guest's CPU under TCG: at every boot,
    in the process every stage runs in, while udev's coldplug (on a reboot) or networking's wait for
    the local stage (on a first boot) runs. Any other command line: None, and argparse reads it
    (a test checks that both give the same for these)."""
    if argv not in BOOT_UNIT_COMMAND_LINES:
        return None
    from types import SimpleNamespace

    return SimpleNamespace(root="/", debug=0, version=False, verb="boot", hand_off="--hand-off" in argv)


def _accept_global_options_after(verb_parser: argparse.ArgumentParser) -> None:
    """``cloudseed plan --root DIR`` as well as ``cloudseed --root DIR plan`` (the docs use both).

    Given after the verb, ``--root`` and ``--debug`` mean what they mean before it; a verb that
    defines one of them itself (``install --root``) keeps its own.
    """
    import argparse

    own = {option for action in verb_parser._actions for option in action.option_strings}
    if "--root" not in own:
        verb_parser.add_argument("--root", default=argparse.SUPPRESS, metavar="DIR",
                                 help="the same as the global --root: work on the root DIR instead of /")
    if "--debug" not in own:
        verb_parser.add_argument("--debug", action="count", default=argparse.SUPPRESS,
                                 help="the same as the global --debug")


def _wait_for_background_commands() -> None:
    """A run on a mounted image (``--root DIR``) ends only when nothing it started still holds DIR."""
    from cloudseed.core.root import wait_for_offline_children

    for line in wait_for_offline_children():
        print(f"cloudseed: {line}", file=sys.stderr)


# import name -> what to install for it (the main dependencies, and the one optional extra)
INSTALL_FOR = {"yaml": "PyYAML", "jinja2": "Jinja2", "pycdlib": "pycdlib", "pyfatfs": "pyfatfs", "fs": "fs",
               "psycopg": "'cloudseed[postgres]'"}


def missing_library(error: ModuleNotFoundError) -> str:
    """What to tell a user whose install lacks a module: which one, and what to install."""
    name = (error.name or "").split(".")[0] or "?"
    what = INSTALL_FOR.get(name, name)
    return f"the Python module {name!r} is not installed; install it with: pip install {what}"


def _help_of(name: str) -> str:
    try:
        return importlib.import_module(f"cloudseed.commands.{name}").HELP
    except ImportError:
        return "(not available)"
