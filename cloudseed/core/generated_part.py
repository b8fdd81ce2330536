"""A committed file with a part generated from declarations (the shell generator's platform
section, the modules' table): the command line both tools share, which checks that part
(``--check``: exit 1 while it is stale) or writes the file again, atomically and keeping its mode.
Developer tooling: never imported at boot.
"""

from __future__ import annotations

import argparse
import os
from typing import Callable


def check_or_rewrite(path: str, generated: Callable[[str], str], part: str, command: str,
                     description: str, argv: list[str] | None = None) -> int:
    """``generated(current text)`` is the file as the declarations make it; ``part`` names what is
    generated in the messages ("platform section"), ``command`` is how to run the tool."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help=f"exit 1 when the committed {part} is stale")
    args = parser.parse_args(argv)
    with open(path) as f:
        current = f.read()
    wanted = generated(current)
    if wanted == current:
        return 0
    if args.check:
        print(f"{path}: the {part} differs from the declarations; run {command}")
        return 1
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(wanted)
    os.chmod(tmp, os.stat(path).st_mode & 0o7777)
    os.replace(tmp, path)
    print(f"{path}: {part} rewritten")
    return 0
