"""Writing and running user commands and scripts inside the target root.

``bootcmd``/``runcmd`` lists become shell scripts (a string item is a shell line, a list item
is an argv, quoted); script directories are run in name order, executables only. Output goes
to ``/var/log/cloudseed-output.log``; a failing script is reported with its exit status and
the others still run.
"""

from __future__ import annotations

import logging
import shlex
import time

from cloudseed.core.root import CommandError, TargetRoot

TYPE_CHECKING = False  # typing is not imported at boot: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Mapping, Sequence

LOG = logging.getLogger("cloudseed.scripts")
OUTPUT_LOG = "/var/log/cloudseed-output.log"


class ScriptFailures(Exception):
    """One or more scripts failed; the message lists them with their exit status."""


def commands_to_script(commands: Any, key: str) -> str:
    """A ``#!/bin/sh`` script for a bootcmd/runcmd style list; ValueError names the bad item."""
    if isinstance(commands, str):
        commands = [commands]
    if not isinstance(commands, list):
        raise ValueError(f"{key}: expected a list of commands, got {type(commands).__name__}")
    lines = ["#!/bin/sh"]
    for index, item in enumerate(commands):
        if isinstance(item, str):
            lines.append(item)
        elif isinstance(item, list):
            if not all(isinstance(a, (str, int, float)) for a in item):
                raise ValueError(f"{key}[{index}]: argv items must be strings")
            lines.append(shlex.join(str(a) for a in item))
        elif item is None:
            continue
        else:
            raise ValueError(f"{key}[{index}]: expected a string or a list, got {type(item).__name__}")
    return "\n".join(lines) + "\n"


def _record_output(root: TargetRoot, name: str, stdout: str, stderr: str) -> None:
    text = (stdout or "") + (stderr or "")
    if not text:
        return
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    header = f"--- {stamp} {name}\n"
    try:
        root.write(OUTPUT_LOG, header + text if text.endswith("\n") else header + text + "\n",
                   mode=0o640, append=True, keep_mode=True)
    except OSError as e:
        LOG.warning("cannot write %s: %s", OUTPUT_LOG, e)


def run_script(root: TargetRoot, inner_path: str, env: Mapping[str, str] | None = None,
               prefix: Sequence[str] = (), succeeded: Callable[[], Any] | None = None) -> None:
    """Run one script of the target (after ``prefix``, an argv such as ``timeout 60``); CommandError
    on a non-zero exit (output kept in the log). ``succeeded`` is called as soon as it exits 0, before
    its output is logged: the record that it ran is then as close to its end as can be."""
    import os

    run_env = dict(os.environ)
    run_env.update(env or {})
    try:
        proc = root.run([*prefix, inner_path], env=run_env, check=False)
    except CommandError as e:  # not found / not executable
        raise CommandError([inner_path], e.returncode, "", e.stderr) from None
    except OSError as e:  # exec format error and friends
        raise CommandError([inner_path], 126, "", str(e)) from None
    if proc.returncode == 0 and succeeded is not None:
        succeeded()
    _record_output(root, inner_path, proc.stdout, proc.stderr)
    if proc.returncode != 0:
        raise CommandError([inner_path], proc.returncode, proc.stdout, proc.stderr)


def executables(root: TargetRoot, directory: str) -> Iterator[str]:
    """The scripts of ``directory`` to run, in name order: plain executable files, no dot files."""
    import os

    for name in root.listdir(directory):
        inner = f"{directory}/{name}"
        host = root.path(inner)
        if not os.path.isfile(host) or name.startswith("."):
            continue
        if not os.access(host, os.X_OK):
            LOG.info("%s is not executable; skipped", inner)
            continue
        yield inner


def run_parts(root: TargetRoot, directory: str, env: Mapping[str, str] | None = None) -> int:
    """Run the executables in ``directory`` in name order; ScriptFailures lists the failures.

    Returns how many ran. Exit codes have no special meaning here (the script modules read
    cloudbase-init's 1001-1003: ``modules/_script_exits.py``).
    """
    failures = []
    ran = 0
    for inner in executables(root, directory):
        ran += 1
        try:
            run_script(root, inner, env)
        except CommandError as e:
            failures.append(f"{inner} (exit {e.returncode})")
            LOG.warning("script %s failed with exit %s", inner, e.returncode)
    if failures:
        raise ScriptFailures(f"{len(failures)} of {ran} scripts failed: {', '.join(failures)}")
    return ran
