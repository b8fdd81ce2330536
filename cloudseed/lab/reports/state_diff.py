"""The differences between two system states (``labstate.collect``), as a person reads them.

``diff(ours, theirs)`` compares what each agent left: files written (kind, mode, owner, content,
with a unified diff of text), users (each field, groups, sudo rules, authorized keys, password
state), groups, sudoers, hostname and hosts, mounts and fstab, enabled and active services,
packages installed during the boot, network configuration written (by content: the two agents
name their files differently), addresses and routes, SSH host key types and the timezone.
``format_diff`` prints them with the category they belong to, and the categories that match.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

CATEGORIES = ("files", "users", "groups", "sudoers", "hostname", "hosts", "mounts", "fstab", "services",
              "packages", "network", "ssh host keys", "timezone")
USER_FIELDS = ("uid", "gid", "primary_group", "gecos", "home", "shell", "groups", "password")


@dataclass
class Difference:
    category: str
    item: str
    ours: str
    theirs: str
    detail: str = ""  # a unified diff of text content, when there is one

    def line(self, names: tuple[str, str]) -> str:
        return f"{self.category}: {self.item}: {names[0]} {self.ours}; {names[1]} {self.theirs}"


def _lines(text: str) -> list[str]:
    """Non-comment lines, whitespace squeezed (comments and blank lines are not configuration)."""
    return [" ".join(line.split()) for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _text_diff(ours: str, theirs: str, names: tuple[str, str], limit: int = 40) -> str:
    lines = list(difflib.unified_diff(theirs.splitlines(), ours.splitlines(), fromfile=names[1], tofile=names[0],
                                      lineterm="", n=1))
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more lines)"]
    return "\n".join(lines)


def _renamed(ours: dict, theirs: dict) -> dict[str, str]:
    """Files each agent wrote under its own name with the same content in the same directory
    (their path -> our path)."""
    import os

    pairs = {}
    for path, record in theirs.items():
        if path in ours or not record.get("sha256"):
            continue
        for other, mine in ours.items():
            if other not in theirs and os.path.dirname(other) == os.path.dirname(path) and \
                    other not in pairs.values() and (mine.get("sha256") == record["sha256"] or
                                                     _config_equal(mine, record)):
                pairs[path] = other
                break
    return pairs


def _config_equal(a: dict, b: dict) -> bool:
    """Both are text with the same lines once comments are set aside (each agent signs its files)."""
    return "text" in a and "text" in b and bool(_lines(a["text"])) and _lines(a["text"]) == _lines(b["text"])


def _files(ours: dict, theirs: dict, names: tuple[str, str], out: list[Difference]) -> None:
    renamed = _renamed(ours, theirs)
    for theirs_path, ours_path in sorted(renamed.items()):
        same = "the same content" if ours[ours_path].get("sha256") == theirs[theirs_path].get("sha256") else \
            "the same lines (comments aside)"
        out.append(Difference("files", ours_path, "wrote this", f"wrote {same} as {theirs_path}"))
    for path in sorted(set(ours) | set(theirs)):
        if path in renamed or path in renamed.values():
            continue
        a, b = ours.get(path), theirs.get(path)
        if a is None or b is None:
            present = a or b or {}
            what = f"{present.get('kind', 'file')} {present.get('mode', '')} {present.get('owner', '')}".strip()
            out.append(Difference("files", path, "wrote it" if a else "did not write it",
                                  "wrote it" if b else "did not write it", what))
            continue
        for key in ("kind", "mode", "owner", "group", "target"):
            if a.get(key) != b.get(key):
                out.append(Difference("files", f"{path} {key}", str(a.get(key)), str(b.get(key))))
        if a.get("sha256") != b.get("sha256"):
            detail = _text_diff(a["text"], b["text"], names) if "text" in a and "text" in b else ""
            out.append(Difference("files", f"{path} content", f"{a.get('size')} bytes", f"{b.get('size')} bytes",
                                  detail))


def _users(ours: dict, theirs: dict, out: list[Difference]) -> None:
    for name in sorted(set(ours) | set(theirs)):
        a, b = ours.get(name), theirs.get(name)
        if a is None or b is None:
            out.append(Difference("users", name, "has it" if a else "has no such user", "has it" if b else
                                  "has no such user"))
            continue
        for key in USER_FIELDS:
            if a.get(key) != b.get(key):
                out.append(Difference("users", f"{name} {key}", _show(a.get(key)), _show(b.get(key))))
        if sorted(a.get("sudo") or []) != sorted(b.get("sudo") or []):
            out.append(Difference("users", f"{name} sudo", _show(a.get("sudo")), _show(b.get("sudo"))))
        if sorted(a.get("authorized_keys") or []) != sorted(b.get("authorized_keys") or []):
            only_a = sorted(set(a.get("authorized_keys") or []) - set(b.get("authorized_keys") or []))
            only_b = sorted(set(b.get("authorized_keys") or []) - set(a.get("authorized_keys") or []))
            out.append(Difference("users", f"{name} authorized keys", f"also {_show(only_a)}" if only_a else "-",
                                  f"also {_show(only_b)}" if only_b else "-"))


def _show(value: Any, limit: int = 160) -> str:
    if isinstance(value, list):
        text = ", ".join(str(v) for v in value) or "none"
    else:
        text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _sets(category: str, item: str, ours: Any, theirs: Any, out: list[Difference]) -> None:
    if ours is None or theirs is None:  # the guest could not tell (a command that did not answer)
        if ours is not theirs:
            out.append(Difference(category, item, "unknown" if ours is None else "known",
                                  "unknown" if theirs is None else "known", "not collected in one of the guests"))
        return
    a, b = set(ours), set(theirs)
    if a != b:
        out.append(Difference(category, item, f"also {_show(sorted(a - b))}" if a - b else "-",
                              f"also {_show(sorted(b - a))}" if b - a else "-"))


def diff(ours: dict, theirs: dict, names: tuple[str, str] = ("cloudseed", "cloud-init")) -> list[Difference]:
    out: list[Difference] = []
    _files(ours.get("files") or {}, theirs.get("files") or {}, names, out)
    _users(ours.get("users") or {}, theirs.get("users") or {}, out)
    groups_a, groups_b = ours.get("groups") or {}, theirs.get("groups") or {}
    for name in sorted(set(groups_a) | set(groups_b)):
        a, b = groups_a.get(name), groups_b.get(name)
        if a is None or b is None:
            out.append(Difference("groups", name, "has it" if a else "has no such group",
                                  "has it" if b else "has no such group"))
        elif a != b:
            for key in ("gid", "members"):
                if a.get(key) != b.get(key):
                    out.append(Difference("groups", f"{name} {key}", _show(a.get(key)), _show(b.get(key))))
    _sets("sudoers", "rules", ours.get("sudoers"), theirs.get("sudoers"), out)
    for key in ("hostname", "fqdn", "etc_hostname"):
        a, b = (ours.get("hostname") or {}).get(key), (theirs.get("hostname") or {}).get(key)
        if a != b:
            out.append(Difference("hostname", key, str(a), str(b)))
    if _lines(ours.get("hosts", "")) != _lines(theirs.get("hosts", "")):
        out.append(Difference("hosts", "/etc/hosts", "differs", "differs",
                              _text_diff("\n".join(_lines(ours.get("hosts", ""))),
                                         "\n".join(_lines(theirs.get("hosts", ""))), names)))
    _sets("mounts", "mounted", ours.get("mounts"), theirs.get("mounts"), out)
    _sets("fstab", "entries", [" ".join(e.split()) for e in ours.get("fstab") or []],
          [" ".join(e.split()) for e in theirs.get("fstab") or []], out)
    _sets("services", "enabled", ours.get("services_enabled"), theirs.get("services_enabled"), out)
    _sets("services", "active", ours.get("services_active"), theirs.get("services_active"), out)
    packages_a, packages_b = ours.get("packages_installed") or {}, theirs.get("packages_installed") or {}
    for name in sorted(set(packages_a) | set(packages_b)):
        if packages_a.get(name) != packages_b.get(name):
            out.append(Difference("packages", name, packages_a.get(name) or "not installed",
                                  packages_b.get(name) or "not installed"))
    net_a = sorted(line for text in (ours.get("network_files") or {}).values() for line in _lines(text))
    net_b = sorted(line for text in (theirs.get("network_files") or {}).values() for line in _lines(text))
    if net_a != net_b:
        out.append(Difference("network", "configuration written",
                              ", ".join(sorted(ours.get("network_files") or {})) or "none",
                              ", ".join(sorted(theirs.get("network_files") or {})) or "none",
                              _text_diff("\n".join(net_a), "\n".join(net_b), names)))
    _sets("network", "addresses", ours.get("addresses"), theirs.get("addresses"), out)
    _sets("network", "routes", ours.get("routes"), theirs.get("routes"), out)
    _sets("ssh host keys", "types", ours.get("ssh_host_keys"), theirs.get("ssh_host_keys"), out)
    if ours.get("timezone") != theirs.get("timezone"):
        out.append(Difference("timezone", "/etc/localtime", str(ours.get("timezone")), str(theirs.get("timezone"))))
    return out


def format_diff(differences: list[Difference], names: tuple[str, str] = ("cloudseed", "cloud-init")) -> str:
    differing = {d.category for d in differences}
    same = [c for c in CATEGORIES if c not in differing]
    if not differences:
        return f"no differences: {names[0]} and {names[1]} left the same state ({', '.join(CATEGORIES)})"
    lines = [f"{len(differences)} difference(s) between {names[0]} and {names[1]}:"]
    for difference in differences:
        lines.append("  " + difference.line(names))
        if difference.detail:
            lines.extend("      " + line for line in difference.detail.splitlines())
    lines.append(f"the same: {', '.join(same) or 'nothing'}")
    return "\n".join(lines)
