"""The sudo rule recogniser (``modules/_sudoers_shape``) against the real ``visudo``: it may only ever
call valid what visudo accepts.

Each rule of the corpus (common shapes, and tricky ones: unbalanced parentheses, unknown tags,
aliases, negation, escapes, quotes, ``#include``, trailing backslashes, non-ASCII, very long lines)
and 2000 mutants of the valid ones (characters inserted, removed or doubled, words
swapped, drawn from a fixed seed) is put in a block as ``_sudoers`` writes it and checked by both:
``visudo -c -f`` of Debian bookworm's sudo in the chroot, and the recogniser. Every block the
recogniser accepts must pass visudo. That the corpus means something is checked too: visudo
rejects the invalid half, and the recogniser accepts the common shapes (else it would save nothing).
"""

from __future__ import annotations

import os
import random
import subprocess

import pytest

from cloudseed.agent.modules._sudoers import render_block
from cloudseed.agent.modules._sudoers_shape import proven_valid

# rules the recogniser must accept (and visudo does): the shapes cloud-configs use
COMMON = [
    "ALL=(ALL) NOPASSWD:ALL", "ALL=(ALL:ALL) ALL", "ALL=(ALL) ALL", "ALL=(root) /bin/ls", "ALL=(ALL) NOPASSWD: ALL",
    "ALL = (ALL) NOPASSWD: ALL", "ALL=(ALL)NOPASSWD:ALL", "ALL=(ALL) NOPASSWD:/usr/bin/apt", "ALL=NOPASSWD:ALL",
    "ALL=(root) /usr/bin/systemctl restart nginx, /usr/bin/journalctl -u nginx",
    "ALL=(ALL:ALL) NOPASSWD:SETENV: /usr/bin/apt-get *", "ALL=(postgres) NOPASSWD: /usr/bin/psql",
    "ALL=(root,www-data) /usr/sbin/service", "ALL=(ALL) NOEXEC: /usr/bin/less", "ALL=(root:adm) /bin/cat",
    "web1,db-2.example.com=(root) /bin/true", "ALL=(ALL)\tNOPASSWD:\tALL", "ALL=/bin/ls,/bin/cat",
]
# rules outside the subset that visudo accepts (the recogniser leaves them to visudo)
OTHER_VALID = [
    "ALL=(ALL) ALL, !/usr/bin/su", "ALL=(ALL) sudoedit /etc/hosts", "ALL=(%admin) ALL", "ALL=(ALL) INTERCEPT: ALL",
    "ALL=(ALL) LOG_OUTPUT: ALL", "ALL=(ALL) /bin/echo a\\,b", "ALL=(ALL) /bin/ls \"\"",
    "ALL=(ALL) sha256:" + "a" * 64 + " /bin/ls", "ALL=(ALL) /usr/bin/", "ALL=(ALL) ALL # note",
    "ALL=(ALL) CWD=/tmp /bin/ls", "ALL=(ALL) ROLE=r TYPE=t ALL", "ALL=(ALL) /bin/ls /tmp/a\\ b", "ALL=(#0) ALL",
    "ALL=(ALL) PASSWD: /usr/bin/passwd, NOPASSWD: /usr/bin/id", "ALL=(ALL) /bin/ls " + " ".join(["x"] * 700),
    # accepted by visudo although they look wrong: an undefined alias is a warning, NOPASSWD alone is an
    # alias name, '=' and a lone '"' in arguments, non-ASCII and NUL pass
    "ALL=(ALL) NOPASSWD", "ALL=(ALL) UNDEFINED_ALIAS", "UNDEFINED_HOSTS=(ALL) ALL", "ALL=(UNDEFINED_RUNAS) ALL",
    "ALL=(ALL) /bin/ls a=b", "ALL=(ALL) /bin/ls \"a", "ALL=(ALL) /bin/lś", "ÄLL=(ALL) ALL", "ALL=(ALL) /bin/ls\x00",
]
INVALID = [
    "ALL=(ALL) /usr/bin/sudoedit",  # sudoers wants sudoedit without a path
    "ALL=(ALL NOPASSWD:ALL", "ALL=ALL) NOPASSWD:ALL", "ALL=((ALL)) ALL", "ALL=(ALL) NOPASWD:ALL",
    "ALL=(ALL) nopasswd:ALL", "ALL=(ALL)", "ALL", "ALL=", "=(ALL) ALL", "ALL=(ALL) ALL,", "ALL=(ALL) ,ALL",
    "ALL=(ALL) bin/ls", "ALL=(ALL) ls", "ALL=(ALL) NOPASSWD:ALL \\", "ALL=(ALL) ALL\\", "ALL=(ALL:) ALL",
    "ALL=(ALL) NOPASSWD:ALL=", "ALL=(ALL) /bin/ls a:b", "ALL=(ALL) ALL ALL",
    "#include /etc/nowhere", "@include /etc/nowhere", "#includedir /nowhere", "Defaults env_reset",
    "ALL=(ALL) NOPASSWD:ALL\\\nroot ALL=(ALL) ALL",
    "ALL=(ALL) NOPASSWD::ALL", "ALL=(ALL) : ALL", "ALL=(a b) ALL", "ALL=(ALL) /bin/ls,", "ALL=(ALL) ALL /bin/ls",
    "ALL=(ALL) NOPASSWD:ALL)", "ALL==(ALL) ALL", "ALL:(ALL) ALL", "a b=(ALL) ALL",
]
NOISE = list(" \t,:=()!\\#\"'%+*./@AaL0é-") + ["\\\n", "ALL", "NOPASSWD:", "INTERCEPT:", "Defaults", "sudoedit",
                                               "sha256:", "(", ")", "#include ", "root", "UPPER", "..", "//"]
USERS = ["alice", "j.doe", "svc-web_1", "_apt"]


def _mutants(count: int) -> list[str]:
    draw = random.Random("sudoers-shape-mutants")
    seeds = COMMON + OTHER_VALID[:6]
    out = []
    while len(out) < count:
        rule = draw.choice(seeds)
        for _ in range(draw.randint(1, 3)):
            at = draw.randrange(len(rule) + 1)
            edit = draw.random()
            if edit < 0.45:
                rule = rule[:at] + draw.choice(NOISE) + rule[at:]
            elif edit < 0.75 and rule:
                rule = rule[:at] + rule[at + draw.randint(1, 3):]
            elif edit < 0.9 and rule:
                rule = rule[:at] + rule[at:at + draw.randint(1, 4)] + rule[at:]
            else:
                words = rule.split(" ")
                draw.shuffle(words)
                rule = " ".join(words)
        out.append(rule)
    return out


def _visudo_accepts(tree: str, block: str, number: int) -> bool:
    inner = f"/tmp/sudoers-shape-{os.getpid()}-{number}"
    with open(os.path.join(tree, inner.lstrip("/")), "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(block)
    os.chmod(os.path.join(tree, inner.lstrip("/")), 0o440)
    proc = subprocess.run(["chroot", tree, "visudo", "-c", "-q", "-f", inner], capture_output=True)
    os.unlink(os.path.join(tree, inner.lstrip("/")))
    return proc.returncode == 0


@pytest.mark.root
def test_the_recogniser_accepts_only_what_visudo_accepts(chroot_tree):
    accepted, wrong = 0, []
    cases = [(rule, USERS[index % len(USERS)]) for index, rule in enumerate(COMMON + OTHER_VALID + INVALID)]
    cases += [(rule, "alice") for rule in _mutants(2000)]
    cases += [(f"ALL=(ALL) {'/bin/' + 'a' * 990}", "alice"), ("ALL=(ALL) ALL", "UPPER"), ("ALL=(ALL) ALL", "a$")]
    for number, (rule, user) in enumerate(cases):
        block = render_block(user, [rule])
        if not proven_valid(block):
            continue
        accepted += 1
        if not _visudo_accepts(chroot_tree, block, number):
            wrong.append((user, rule))
    assert wrong == [], f"the recogniser called valid what visudo rejects: {wrong}"
    assert accepted >= len(COMMON)


@pytest.mark.root
def test_the_corpus_means_something(chroot_tree):
    """The common shapes are recognised and valid; visudo accepts the other valid ones and rejects the
    invalid ones (so the test above had something to catch); the recogniser leaves those to it."""
    wrong = []
    for number, rule in enumerate(COMMON):
        block = render_block("alice", [rule])
        if not (proven_valid(block) and _visudo_accepts(chroot_tree, block, number)):
            wrong.append(("common", rule))
    for number, rule in enumerate(OTHER_VALID):
        block = render_block("alice", [rule])
        if proven_valid(block) or not _visudo_accepts(chroot_tree, block, 1000 + number):
            wrong.append(("other valid", rule))
    for number, rule in enumerate(INVALID):
        block = render_block("alice", [rule])
        if proven_valid(block) or _visudo_accepts(chroot_tree, block, 2000 + number):
            wrong.append(("invalid", rule))
    assert wrong == []
    # several users' blocks together, one of them not of the subset
    blocks = render_block("alice", COMMON[:3]) + render_block("bob", ["ALL=(ALL) ALL, !/usr/bin/su"])
    assert not proven_valid(blocks) and _visudo_accepts(chroot_tree, blocks, 3000)


def test_block_titles_and_names_outside_the_subset_are_left_to_visudo():
    assert proven_valid(render_block("alice", ["ALL=(ALL) NOPASSWD:ALL", "ALL=(root) /bin/ls"]))
    assert not proven_valid(render_block("Alice", ["ALL=(ALL) ALL"]))   # an alias name in sudoers
    assert not proven_valid(render_block("alice", ["ALL=(ALL) ALL"]).replace("alice ALL", "bob,alice ALL"))
    assert not proven_valid("\n# User rules for alice\\\nalice ALL=(ALL) ALL\n")
    assert not proven_valid("\n# User rules for alice\r\nalice ALL=(ALL) ALL\n")
    assert not proven_valid("#include /etc/x\n")
