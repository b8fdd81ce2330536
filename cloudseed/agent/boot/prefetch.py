"""Page-cache warming for the next boot stage: the kernel reads its Python files in the background.

Early in a boot the page cache is cold, and a stage's imports then wait on the disk one small
file at a time; in an emulated boot importing PyYAML alone took about 1 s cold against 0.4 s warm.
The local stage ends seconds before the network stage starts (DHCP runs in between), so it asks
the kernel (``posix_fadvise(WILLNEED)``, no data copied, nothing waited for) to read ahead what the
network stage imports: PyYAML and its C parts, and the user-data, module and distro packages.
"""

from __future__ import annotations

import os
import sys

# packages of the network stage, relative to the cloudseed package
CLOUDSEED_PACKAGES = ("core", "agent", "agent/boot", "agent/state", "agent/config", "agent/userdata", "agent/modules",
                      "agent/distros")
# standard library modules PyYAML, the schema check and the modules import that the local stage
# does not (measured: tests/agent/test_prefetch.py), and the C extensions behind them (built into
# the interpreter on Debian, separate files in other builds)
STDLIB_MODULES = ("bisect", "datetime", "difflib", "glob", "gzip", "hashlib", "heapq", "hmac", "pkgutil", "queue",
                  "random", "secrets", "shlex", "socket", "concurrent/__init__", "concurrent/futures/__init__",
                  "concurrent/futures/_base", "concurrent/futures/thread")
STDLIB_EXTENSIONS = ("_bisect", "_blake2", "_datetime", "_hashlib", "_heapq", "_queue", "_random", "_sha512",
                     "_socket", "array")


def _files_in(directory: str, suffixes: tuple[str, ...]) -> list[str]:
    try:
        with os.scandir(directory) as entries:
            return [entry.path for entry in entries if entry.name.endswith(suffixes) and entry.is_file()]
    except OSError:
        return []


def _modules_of(directory: str, tag: str) -> list[str]:
    """What importing each module of ``directory`` reads: its compiled file, or its source without one."""
    compiled = set(_files_in(os.path.join(directory, "__pycache__"), (tag,)))
    files = []
    for source in _files_in(directory, (".py",)):
        name = os.path.basename(source)[:-3]
        cached = os.path.join(directory, "__pycache__", name + tag)
        files.append(cached if cached in compiled else source)
    return files


def network_stage_files() -> list[str]:
    """The files the network stage will import, where they exist."""
    tag = f".{sys.implementation.cache_tag}.pyc"
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the cloudseed package
    files = []
    for package in CLOUDSEED_PACKAGES:
        files += _modules_of(os.path.join(here, package), tag)
    yaml_dir = os.path.join(os.path.dirname(here), "yaml")  # usually beside cloudseed
    if not os.path.isdir(yaml_dir):
        yaml_dir = next((os.path.join(p, "yaml") for p in sys.path if os.path.isdir(os.path.join(p, "yaml"))), "")
    if yaml_dir:
        files += _modules_of(yaml_dir, tag) + _files_in(yaml_dir, (".so",))
    stdlib = os.path.dirname(os.__file__)
    for module in STDLIB_MODULES:
        directory, name = os.path.split(os.path.join(stdlib, module))
        cached = os.path.join(directory, "__pycache__", name + tag)
        files.append(cached if os.path.exists(cached) else os.path.join(directory, name + ".py"))
    extensions = _files_in(os.path.join(stdlib, "lib-dynload"), (".so",))
    files += [path for path in extensions if os.path.basename(path).split(".")[0] in STDLIB_EXTENSIONS]
    return files


def warm(paths: list[str]) -> int:
    """Ask the kernel to read ``paths`` ahead; returns how many it was asked for."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return 0
    asked = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            advise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            asked += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return asked
