"""A strict recogniser of the common shapes of a user's sudo rules, proving them valid without ``visudo``.

``visudo -c`` costs about 0.3 s under emulation on a first boot's path to sshd. Most rules a
cloud-config gives are a few simple shapes (``ALL=(ALL) NOPASSWD:ALL``, ``ALL=(ALL:ALL) ALL``,
``ALL=(root) /usr/bin/apt, /bin/ls -l``), and a block of ``_sudoers`` (a title comment, then
``NAME RULE`` lines) made only of such lines is valid sudoers syntax in every sudo release. This
file recognises exactly that subset of the sudoers grammar, on purpose much smaller than it:

    line      := NAME blanks hosts blanks? "=" blanks? runas? tags command ("," blanks? command)*
    hosts     := host ("," blanks? host)*        host := "ALL" | a lowercase host name
    runas     := "(" names (":" names)? ")" blanks?   names := name ("," blanks? name)*, name := "ALL" | NAME
    tags      := (TAG ":" blanks?)*              TAG  := NOPASSWD | PASSWD | NOEXEC | EXEC | SETENV | NOSETENV
    command   := "ALL" | an absolute path of [A-Za-z0-9_.+-/] (not ending in "/", no "." or ".."
                 component, not sudoedit) (blanks argument)*
    argument  := [A-Za-z0-9_.+/*-]+

where NAME starts with a lowercase letter or "_" and holds only lowercase letters, digits, "_", "."
and "-" (an upper-case first letter would make it an alias name in sudoers), ASCII only, lines of
at most 1000 characters. Anything else (aliases, negation, digests, escapes, quotes, ``Defaults``,
``#include``, a backslash, other tags, a user list) is not judged here: ``_sudoers`` then asks
``visudo -c`` as before. The recogniser may only ever say "valid" for what visudo accepts; the
differential test (``tests/agent/modules/test_sudoers_shape.py``) runs both over a corpus with the
real ``visudo``.
"""

from __future__ import annotations

import re

_NAME = r"[a-z_][a-z0-9_.-]*"
_HOST = r"(?:ALL|[a-z][a-z0-9-]*(?:\.[a-z0-9][a-z0-9-]*)*)"
_RUNAS_NAME = rf"(?:ALL|{_NAME})"
_RUNAS_LIST = rf"{_RUNAS_NAME}(?:,[ \t]*{_RUNAS_NAME})*"
_TAG = r"(?:NOPASSWD|PASSWD|NOEXEC|EXEC|SETENV|NOSETENV)"
# a path component is never "." or ".." nor sudoedit (which sudoers wants without a path)
_COMPONENT = r"(?!\.\.?(?:/|[ \t,]|$))(?!sudoedit(?:[ \t,]|$))[A-Za-z0-9_.+-]+"
_PATH = rf"/{_COMPONENT}(?:/{_COMPONENT})*"
_COMMAND = r"(?:ALL|" + _PATH + r"(?:[ \t]+[A-Za-z0-9_.+/*-]+)*)"
_RULE = re.compile(
    rf"(?P<user>{_NAME})[ \t]+"
    rf"{_HOST}(?:,[ \t]*{_HOST})*[ \t]*=[ \t]*"
    rf"(?:\({_RUNAS_LIST}(?::{_RUNAS_LIST})?\)[ \t]*)?"
    rf"(?:{_TAG}:[ \t]*)*"
    rf"{_COMMAND}(?:[ \t]*,[ \t]*{_COMMAND})*[ \t]*"
)
_TITLE = re.compile(rf"# User rules for {_NAME}")
MAX_LINE = 1000


def proven_valid(block: str) -> bool:
    """True when every line of ``block`` is blank, a block title or a rule of the subset above (so
    ``visudo -c`` would accept it); False means "not judged here", never "invalid"."""
    if not block.isascii():
        return False
    for line in block.split("\n"):
        if not line:
            continue
        if len(line) > MAX_LINE:
            return False
        if _TITLE.fullmatch(line):
            continue
        if not _RULE.fullmatch(line):
            return False
    return True
