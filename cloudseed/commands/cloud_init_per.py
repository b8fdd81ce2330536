"""``cloudseed cloud-init-per once|instance|always NAME CMD...``: cloud-init's ``cloud-init-per``.

Runs CMD unless a semaphore says it already ran: ``once`` ever on this machine, ``instance``
once per instance id, ``always`` every time. The semaphores are cloud-init's, at cloud-init's
paths, so both tools agree about what ran: ``/var/lib/cloud/sem/bootper.NAME.once|always`` and
``/var/lib/cloud/instance/sem/bootper.NAME.instance`` (the current instance's directory; before
the agent has published ``/var/lib/cloud/instance``, cloudseed's own link to it is used). Dashes in
NAME become underscores, a semaphore spelled with dashes by an older version is renamed, the
semaphore is written after CMD ran whatever its exit code (``CODE<TAB>EPOCH``), and the exit code is
CMD's (0 when skipped; 1 for a bad use). Installed as ``/usr/bin/cloud-init-per`` (``main``).
With ``--root``, CMD runs chrooted into the root.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HELP = "run a command once, once per instance or always, as cloud-init-per does"

FREQUENCIES = ("once", "instance", "always")
ONCE_DIR = "/var/lib/cloud/sem"
INSTANCE_LINK = "/var/lib/cloud/instance"
USAGE = """Usage: cloud-init-per frequency name cmd [ arg1 [ arg2 [ ... ] ]
   run cmd with arguments provided.

   If frequency is:
      * once: run only once (do not re-run for new instance-id)
      * instance: run only the first boot for a given instance-id
      * always: run every boot
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("frequency", help="once, instance or always")
    parser.add_argument("name", help="the semaphore's name")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")


def semaphore(root, frequency: str, name: str) -> str | None:
    """Where the semaphore of NAME at FREQUENCY lives (inside the root); None: no instance yet."""
    if frequency != "instance":
        return f"{ONCE_DIR}/bootper.{name}.{frequency}"
    if os.path.isdir(root.path(INSTANCE_LINK)):
        return f"{INSTANCE_LINK}/sem/bootper.{name}.instance"
    from cloudseed.agent.state import Paths

    own = Paths(root).instance_link
    if os.path.isdir(root.path(own)):
        return f"{own}/sem/bootper.{name}.instance"
    return None


def run(args: argparse.Namespace) -> int:
    from cloudseed.core.root import TargetRoot

    if not args.command or args.frequency not in FREQUENCIES:
        sys.stderr.write(USAGE)
        if args.command:
            print(f"invalid frequency: {args.frequency}", file=sys.stderr)
        return 1
    name = args.name.replace("-", "_")
    if "/" in name:
        print("name cannot contain a /", file=sys.stderr)
        return 1
    if os.geteuid() != 0:
        print("must be root", file=sys.stderr)
        return 1
    from cloudseed.agent.boot.lock import run_locked

    root = TargetRoot(args.root)
    return run_locked(root, f"cloud-init-per {name}", lambda: _run_once(root, args, name))


def _run_once(root, args: argparse.Namespace, name: str) -> int:
    sem = semaphore(root, args.frequency, name)
    if sem is None:
        print("cloud-init-per: no instance yet (the agent has not found its datasource)", file=sys.stderr)
        return 1
    legacy = sem.replace("_", "-")
    if legacy != sem and root.exists(legacy) and not root.exists(sem):
        os.rename(root.path(legacy), root.path_nofollow(sem))
    if args.frequency != "always" and root.exists(sem):
        return 0
    from cloudseed.core.root import CommandError

    sys.stdout.flush()
    try:
        code = root.run(args.command, check=False, capture=False).returncode
    except CommandError as e:  # not found (127), not executable (126): the shell's codes
        print(f"cloud-init-per: {e.stderr}", file=sys.stderr)
        code = e.returncode
    root.write(sem, f"{code}\t{int(time.time())}\n", mode=0o644)
    return code


def main() -> int:
    """``/usr/bin/cloud-init-per``: its arguments are cloud-init-per's (``-h`` prints the usage)."""
    argv = sys.argv[1:]
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return 0
    if len(argv) < 3:
        sys.stderr.write(USAGE)
        return 1
    return run(argparse.Namespace(root="/", frequency=argv[0], name=argv[1],
                                  command=argv[2:]))
