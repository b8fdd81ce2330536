"""Privilege rules for users: the sudoers drop-in and doas rules, checked before they are installed.

``/etc/sudoers.d/90-cloudseed-users`` holds one block per user (``# User rules for NAME`` then
``NAME <rule>`` lines); writing a user's rules replaces that user's block and keeps the others.
Each user's block is checked on its own with ``visudo -c`` (when the target has visudo) so one
bad rule never blocks the other users and an invalid file is never installed; with several users,
one ``visudo`` run checks all their blocks first (``check_together``): each visudo costs about
0.3 s under emulation, and a block (``NAME <rule>`` lines, one rule a line) cannot define anything
another uses, so blocks valid together are each valid alone. When that run complains, each
block is checked on its own as before, so the errors name the same users. A block made only of
the common simple shapes (``ALL=(ALL) NOPASSWD:ALL``, ``ALL=(root) /usr/bin/apt``...) is proven
valid without visudo by ``_sudoers_shape`` (a strict recogniser of that subset, tested against
the real visudo); only the other blocks go to visudo. ``/etc/sudoers`` gets an
``#includedir /etc/sudoers.d`` line if it has none.
"""

from __future__ import annotations

import os
import re
from typing import Any

from cloudseed.agent.modules._sudoers_shape import proven_valid
from cloudseed.core.root import CommandError, TargetRoot, writer_tag

SUDOERS = "/etc/sudoers"
SUDOERS_DIR = "/etc/sudoers.d"
BLOCK_TITLE = "# User rules for "
# rules are checked in a file of the agent's own run directory, never in the directory they go to
# (a read-only /etc/sudoers.d must fail the rules' installation only, named, not their check)
CHECK_DIR = "/run/cloudseed"


class RuleError(ValueError):
    """A sudo or doas rule is not acceptable; the message says why."""


def rules_from_config(value: Any, key: str) -> list[str]:
    """``sudo:`` as a list of rule strings ([] for false/null); RuleError naming ``key``."""
    if value is None or value is False:
        return []
    if value is True:
        raise RuleError(f"{key}: true is not a sudo rule (write a rule such as 'ALL=(ALL) NOPASSWD:ALL')")
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise RuleError(f"{key}: expected a rule string or a list of rules, got {type(value).__name__}")
    rules = []
    for index, item in enumerate(items):
        where = f"{key}[{index}]" if not isinstance(value, str) else key
        if not isinstance(item, str) or not item.strip():
            raise RuleError(f"{where}: expected a non-empty rule string")
        if "\n" in item or "\r" in item:
            raise RuleError(f"{where}: a rule must be on one line")
        rules.append(item.strip())
    return rules


def render_block(user: str, rules: list[str]) -> str:
    return "\n" + BLOCK_TITLE + user + "\n" + "".join(f"{user} {rule}\n" for rule in rules)


def split_blocks(text: str) -> tuple[str, dict[str, str]]:
    """(header text, {user: block text}) of a file written by ``write_user_rules``."""
    header_lines, blocks, current = [], {}, None
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.startswith(BLOCK_TITLE):
            current = line[len(BLOCK_TITLE):].strip()
            blocks[current] = "\n" + line
            continue
        if current is None:
            nxt = lines[index + 1] if index + 1 < len(lines) else ""
            if line.strip() == "" and nxt.startswith(BLOCK_TITLE):
                continue
            header_lines.append(line)
        elif line.strip() == "" and index + 1 < len(lines) and lines[index + 1].startswith(BLOCK_TITLE):
            continue
        else:
            blocks[current] += line
    return "".join(header_lines), blocks


def check_with_visudo(root: TargetRoot, content: str, where: str) -> None:
    """RuleError with visudo's complaint when ``content`` is not valid sudoers syntax."""
    visudo = root.which("visudo")
    if visudo is None:
        _basic_check(content, where)
        return
    probe = f"{CHECK_DIR}/sudoers-check.{writer_tag()}"
    root.write(probe, content, mode=0o440)
    try:
        root.run([visudo, "-c", "-f", probe], timeout=30)
    except CommandError as e:
        lines = [line.strip() for line in (e.stderr + "\n" + e.stdout).splitlines()
                 if line.strip() and "parsed OK" not in line]
        detail = lines[0].replace(root.path(probe), "rule").replace(probe, "rule") if lines else str(e)
        raise RuleError(f"{where}: rejected by visudo: {detail}") from None
    finally:
        root.remove(probe)


_RULE_SHAPE = re.compile(r"^\S+\s+\S.*=.*\S$")


def _basic_check(content: str, where: str) -> None:
    for line in content.splitlines():
        if line.strip() and not line.startswith("#") and not _RULE_SHAPE.match(line.strip()):
            raise RuleError(f"{where}: {line.split(None, 1)[-1]!r} does not look like a sudo rule "
                            "('HOSTS=(RUNAS) COMMANDS')")


def ensure_includedir(root: TargetRoot, header: str) -> None:
    text = root.read_text(SUDOERS, default="")
    for line in text.splitlines():
        match = re.match(r"^[#@]includedir\s+(\S+)", line.strip())
        if match and os.path.normpath(match.group(1)) == SUDOERS_DIR:
            break
    else:
        if text:
            root.write(SUDOERS, text + f"\n{header.replace('Created', 'Added')}\n#includedir {SUDOERS_DIR}\n",
                       mode=0o440, keep_mode=True)
        else:
            root.write(SUDOERS, f"# See sudoers(5) for more information on \"#include\" directives:\n\n"
                                f"{header.replace('Created', 'Added')}\n#includedir {SUDOERS_DIR}\n", mode=0o440)
    root.makedirs(SUDOERS_DIR, mode=0o750)


def check_together(root: TargetRoot, blocks: list[str]) -> frozenset[str]:
    """The blocks known valid: those of the simple shapes ``_sudoers_shape`` proves valid, and the
    others when one ``visudo -c`` run finds them valid together (none of the others when it
    complains: each is then checked on its own; nor when they are fewer than two or there is no
    visudo)."""
    proven = frozenset(block for block in blocks if proven_valid(block))
    rest = [block for block in dict.fromkeys(blocks) if block not in proven]
    if len(rest) < 2 or root.which("visudo") is None:
        return proven
    try:
        check_with_visudo(root, "".join(rest), "sudo rules")
    except RuleError:
        return proven
    return proven | frozenset(rest)


def write_user_rules(root: TargetRoot, path: str, user: str, rules: list[str], header: str, where: str,
                     checked: frozenset[str] = frozenset()) -> None:
    """Check ``user``'s rules (unless ``checked`` holds its block: ``check_together``) and put them in
    ``path`` (replacing that user's previous block)."""
    block = render_block(user, rules)
    if block not in checked and not proven_valid(block):
        check_with_visudo(root, block, where)
    ensure_includedir(root, header)
    existing = root.read_text(path, default="")
    head, blocks = split_blocks(existing) if existing else (header + "\n", {})
    blocks[user] = block
    root.write(path, head + "".join(blocks.values()), mode=0o440)


# ---------------------------------------------------------------------- doas
def doas_rules_from_config(value: Any, user: str, key: str) -> list[str]:
    """``doas:`` rules for ``user``: each a full doas.conf rule that applies to that user."""
    if value is None or value is False:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise RuleError(f"{key}: expected a list of doas rules")
    rules = []
    for index, item in enumerate(items):
        where = f"{key}[{index}]"
        if not isinstance(item, str) or "\n" in item:
            raise RuleError(f"{where}: expected a one-line doas rule")
        words = item.split()
        if not words or words[0] not in ("permit", "deny"):
            raise RuleError(f"{where}: a doas rule starts with 'permit' or 'deny'")
        identity = next((w for w in words[1:] if w not in ("nopass", "nolog", "persist", "keepenv")
                         and not w.startswith("setenv")), "")
        if identity != user:
            raise RuleError(f"{where}: the rule must be for user {user!r} (found {identity!r})")
        rules.append(" ".join(words))
    return rules


def write_doas_rules(root: TargetRoot, path: str, user: str, rules: list[str], header: str, where: str) -> None:
    block = render_block(user, []).rstrip("\n") + "\n" + "".join(f"{rule}\n" for rule in rules)
    existing = root.read_text(path, default="")
    head, blocks = split_blocks(existing) if existing else (header + "\n", {})
    blocks[user] = block
    content = head + "".join(blocks.values())
    doas = root.which("doas")
    if doas is not None:
        probe = f"{CHECK_DIR}/doas-check.{writer_tag()}"
        root.write(probe, content, mode=0o400)
        try:
            root.run([doas, "-C", probe], timeout=30)
        except CommandError as e:
            raise RuleError(f"{where}: rejected by doas -C: {(e.stderr or e.stdout).strip()}") from None
        finally:
            root.remove(probe)
    root.write(path, content, mode=0o400)
