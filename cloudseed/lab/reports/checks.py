"""``--expect FILE``: what should hold in the guest once the agent is done, and the verdict.

The file is YAML::

    hostname: web-1                      # and/or fqdn: web-1.example.com
    files:
      /etc/motd: {content: "hello\\n", mode: "0644", owner: root}
      /etc/app.conf: {contains: "port=8080", matches: "^user=\\\\w+$"}
      /etc/removed: {exists: false}
    users:
      deploy: {shell: /bin/bash, groups: [sudo], sudo: "ALL=(ALL) NOPASSWD:ALL",
               authorized_keys: ["ssh-ed25519 AAAA..."], password: locked}
    groups:
      docker: {members: [deploy]}
    services:
      ssh: {enabled: true, active: true}
    packages:
      curl: true            # installed; false: not installed; "7.88*": installed, version matching
    mounts:
      /mnt/data: {source: /dev/vdb1, fstype: ext4, options: [noatime], fstab: true}
      /mnt/none: false
    commands:
      - {run: "curl -s localhost", exit: 0, stdout: "welcome", timeout: 30}

``load`` checks the file and names each problem with its line (unknown keys get a did-you-mean);
``queries`` are the facts to ask the guest for (``labstate.fact``); ``evaluate`` judges them: one
``Check`` per aspect, with what was expected and what was found.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any, Optional


class ExpectError(Exception):
    """The --expect file is not valid; the message names the file, line and key."""


SECTIONS = ("hostname", "fqdn", "files", "users", "groups", "services", "packages", "mounts", "commands")
KEYS = {
    "files": ("exists", "kind", "content", "contains", "matches", "mode", "owner", "group", "target"),
    "users": ("exists", "uid", "shell", "home", "gecos", "primary_group", "groups", "sudo", "authorized_keys",
              "password"),
    "groups": ("exists", "gid", "members"),
    "services": ("enabled", "active"),
    "mounts": ("source", "fstype", "options", "fstab"),
    "commands": ("name", "run", "exit", "stdout", "stdout_is", "stdout_matches", "stderr", "stderr_is",
                 "stderr_matches", "timeout"),
}
PASSWORD_STATES = ("locked", "set", "empty")
FILE_KINDS = ("file", "directory", "link")


@dataclass
class Check:
    subject: str  # "file /etc/motd", "user deploy", "command 1 (curl -s localhost)"
    aspect: str  # "mode", "exists", "exit"...
    ok: bool
    expected: str
    found: str
    line: Optional[int] = None  # in the --expect file

    def describe(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        if self.ok:
            return f"ok    {self.subject}: {self.aspect} {self.expected}{where}"
        return f"FAIL  {self.subject}: {self.aspect}: expected {self.expected}, found {self.found}{where}"


@dataclass
class Expectations:
    source: str
    data: dict[str, Any]
    lines: dict[tuple, int] = field(default_factory=dict)
    raw: dict[tuple, str] = field(default_factory=dict)  # scalars as written (a mode 0644 is not decimal 420)

    def line(self, *path: Any) -> Optional[int]:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def _suggest(word: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else f" (one of: {', '.join(choices)})"


def load(path: str) -> Expectations:
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as e:
        raise ExpectError(f"{path}: {e.strerror}") from None
    from cloudseed.core.yaml_loading import compose_yaml, load_yaml

    try:
        node = compose_yaml(text)
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise ExpectError(f"{path}: not valid YAML: {e}") from None
    lines: dict[tuple, int] = {}
    raw: dict[tuple, str] = {}

    def walk(current: Any, prefix: tuple) -> None:
        if isinstance(current, yaml.ScalarNode):
            raw[prefix] = current.value
        elif isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                here = (*prefix, key.value)
                lines[here] = key.start_mark.line + 1
                walk(value, here)
        elif isinstance(current, yaml.SequenceNode):
            for index, item in enumerate(current.value):
                lines[(*prefix, index)] = item.start_mark.line + 1
                walk(item, (*prefix, index))

    walk(node, ())
    expect = Expectations(path, data if data is not None else {}, lines, raw)
    _validate(expect)
    return expect


def _fail(expect: Expectations, path: tuple, message: str) -> None:
    line = expect.line(*path)
    where = f"line {line}, " if line else ""
    raise ExpectError(f"{expect.source}: {where}{'.'.join(str(p) for p in path) or 'top level'}: {message}")


def _validate(expect: Expectations) -> None:
    data = expect.data
    if not isinstance(data, dict):
        _fail(expect, (), "the file must be a mapping of sections (" + ", ".join(SECTIONS) + ")")
    for section, value in data.items():
        if section not in SECTIONS:
            _fail(expect, (section,), "unknown section" + _suggest(str(section), SECTIONS))
        if section in ("hostname", "fqdn"):
            if not isinstance(value, str):
                _fail(expect, (section,), "must be a string")
            continue
        if section == "commands":
            if not isinstance(value, list):
                _fail(expect, (section,), "must be a list of commands")
            for index, command in enumerate(value):
                if not isinstance(command, dict) or not isinstance(command.get("run"), str):
                    _fail(expect, (section, index), "each command is a mapping with a `run` string")
                _keys(expect, (section, index), command, KEYS["commands"])
                for regex in ("stdout_matches", "stderr_matches"):
                    if regex in command:
                        _regex(expect, (section, index, regex), command[regex])
            continue
        if not isinstance(value, dict):
            _fail(expect, (section,), "must be a mapping (name or path: what should hold)")
        for name, wanted in value.items():
            here = (section, name)
            if section == "packages":
                if not isinstance(wanted, (bool, str)):
                    _fail(expect, here, "true (installed), false (not installed) or a version pattern")
                continue
            if section == "mounts" and wanted is False:
                continue
            if not isinstance(wanted, dict):
                _fail(expect, here, "must be a mapping of what should hold" +
                      (" (or false: not mounted)" if section == "mounts" else ""))
            _keys(expect, here, wanted, KEYS[section])
            if section == "files":
                if "mode" in wanted:
                    _mode(expect, (*here, "mode"), expect.raw.get((*here, "mode"), wanted["mode"]))
                if "matches" in wanted:
                    _regex(expect, (*here, "matches"), wanted["matches"])
                if wanted.get("kind", "file") not in FILE_KINDS:
                    _fail(expect, (*here, "kind"), f"one of {', '.join(FILE_KINDS)}")
            if section == "users" and wanted.get("password", "set") not in PASSWORD_STATES:
                _fail(expect, (*here, "password"), f"one of {', '.join(PASSWORD_STATES)}")


def _keys(expect: Expectations, path: tuple, mapping: dict, allowed: tuple[str, ...]) -> None:
    for key in mapping:
        if key not in allowed:
            _fail(expect, (*path, key), "unknown key" + _suggest(str(key), allowed))


def _regex(expect: Expectations, path: tuple, pattern: Any) -> None:
    try:
        re.compile(str(pattern))
    except re.error as e:
        _fail(expect, path, f"not a valid regular expression: {e}")


def _mode(expect: Expectations, path: tuple, value: Any) -> int:
    try:
        return parse_mode(value)
    except ValueError:
        _fail(expect, path, f"{value!r} is not a file mode (like \"0644\")")
    return 0


def parse_mode(value: Any) -> int:
    """A mode as written in the file ("0644", 0644, 644, 0o644: octal digits in every case)."""
    if isinstance(value, bool):
        raise ValueError(value)
    text = str(value).strip()
    mode = int(text[2:] if text.lower().startswith("0o") else text, 8)
    if not 0 <= mode <= 0o7777:
        raise ValueError(value)
    return mode


# -- what to ask the guest --------------------------------------------------------------------

def queries(expect: Expectations) -> list[dict[str, Any]]:
    data = expect.data
    out: list[dict[str, Any]] = []
    if "hostname" in data or "fqdn" in data:
        out.append({"kind": "hostname", "name": ""})
    for section, kind in (("files", "file"), ("users", "user"), ("groups", "group"), ("services", "service"),
                          ("packages", "package"), ("mounts", "mount")):
        for name in data.get(section) or {}:
            out.append({"kind": kind, "name": str(name)})
    for command in data.get("commands") or []:
        out.append({"kind": "command", "name": command["run"], "timeout": command.get("timeout", 60)})
    return out


# -- the verdict ------------------------------------------------------------------------------

def _show(value: Any, limit: int = 120) -> str:
    if value is None:
        return "nothing"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _key_blob(line: str) -> Optional[tuple[str, str]]:
    """(type, base64) of an authorized_keys line, whatever options or comment it has."""
    fields = line.split()
    for index, token in enumerate(fields[:-1]):
        if token.startswith(("ssh-", "ecdsa-", "sk-")):
            return token, fields[index + 1]
    return None


def _squash(rule: str) -> str:
    return re.sub(r"\s+", "", rule)


def evaluate(expect: Expectations, facts: list[dict[str, Any]]) -> list[Check]:
    """One Check per aspect; ``facts`` answer ``queries(expect)``, in order."""
    answers = iter(facts)
    data = expect.data
    out: list[Check] = []

    def add(subject: str, aspect: str, ok: bool, expected: Any, found: Any, *path: Any) -> None:
        out.append(Check(subject, aspect, bool(ok), expected if isinstance(expected, str) else _show(expected),
                         found if isinstance(found, str) else _show(found), expect.line(*path)))

    if "hostname" in data or "fqdn" in data:
        fact = next(answers)
        if "hostname" in data:
            add("hostname", "is", fact.get("hostname") == data["hostname"], _show(data["hostname"]),
                _show(fact.get("hostname")), "hostname")
        if "fqdn" in data:
            add("hostname", "fqdn", fact.get("fqdn") == data["fqdn"], _show(data["fqdn"]), _show(fact.get("fqdn")),
                "fqdn")
    for path, wanted in (data.get("files") or {}).items():
        _file(add, str(path), wanted, next(answers), expect.raw.get(("files", path, "mode")))
    for name, wanted in (data.get("users") or {}).items():
        _user(add, str(name), wanted, next(answers))
    for name, wanted in (data.get("groups") or {}).items():
        fact, subject = next(answers), f"group {name}"
        exists = wanted.get("exists", True)
        add(subject, "exists", fact.get("exists") == exists, str(exists).lower(), str(fact.get("exists")).lower(),
            "groups", name)
        if exists and fact.get("exists"):
            if "gid" in wanted:
                add(subject, "gid", fact.get("gid") == wanted["gid"], wanted["gid"], fact.get("gid"),
                    "groups", name, "gid")
            if "members" in wanted:
                missing = [m for m in wanted["members"] or [] if m not in fact.get("members", [])]
                add(subject, "members", not missing, f"members {', '.join(wanted['members'] or [])}",
                    f"members {', '.join(fact.get('members') or []) or 'none'}", "groups", name, "members")
    for name, wanted in (data.get("services") or {}).items():
        fact, subject = next(answers), f"service {fact_unit(name)}"
        if "enabled" in wanted:
            enabled = fact.get("enabled") in ("enabled", "enabled-runtime", "static", "alias", "indirect",
                                              "generated") if wanted["enabled"] else \
                fact.get("enabled") not in ("enabled", "enabled-runtime")
            add(subject, "enabled", enabled, "enabled" if wanted["enabled"] else "not enabled",
                fact.get("enabled", "?"), "services", name, "enabled")
        if "active" in wanted:
            active = (fact.get("active") == "active") == bool(wanted["active"])
            add(subject, "active", active, "active" if wanted["active"] else "not active", fact.get("active", "?"),
                "services", name, "active")
    for name, wanted in (data.get("packages") or {}).items():
        fact, subject = next(answers), f"package {name}"
        found = f"installed, version {fact['version']}" if fact.get("installed") else "not installed"
        if isinstance(wanted, str):
            add(subject, "version", bool(fact.get("installed")) and fnmatch.fnmatch(fact.get("version", ""), wanted),
                f"installed, version {wanted}", found, "packages", name)
        else:
            add(subject, "installed", bool(fact.get("installed")) == wanted, "installed" if wanted else "not installed",
                found, "packages", name)
    for path, wanted in (data.get("mounts") or {}).items():
        _mount(add, str(path), wanted, next(answers))
    for index, command in enumerate(data.get("commands") or []):
        _command(add, index, command, next(answers))
    return out


def agent_check(status: Any, result: Any = None, log: Optional[str] = None) -> Check:
    """The check every --expect run has first: the agent finished, and without errors."""
    from cloudseed.lab.reports.agent_report import summarize

    own = summarize(status, result, log)
    errors = [str(e) for e in own["errors"]]
    finished = own["status"] not in (None, "running")
    return Check("agent", "finished without errors", finished and not errors, "no errors",
                 "; ".join(errors)[:300] if errors else ("no errors" if finished else f"status {own['status']}"))


def judge(expect: Expectations, facts: list[dict[str, Any]], status: Any, result: Any = None,
          log: Optional[str] = None) -> list[Check]:
    """The agent's own verdict, then each check of the file."""
    return [agent_check(status, result, log), *evaluate(expect, facts)]


def fact_unit(name: str) -> str:
    return name if "." in name else f"{name}.service"


def _file(add, path: str, wanted: dict, fact: dict, raw_mode: Optional[str] = None) -> None:
    subject, here = f"file {path}", ("files", path)
    exists = wanted.get("exists", True)
    add(subject, "exists", fact.get("exists") == exists, "present" if exists else "absent",
        "present" if fact.get("exists") else "absent", *here)
    if not (exists and fact.get("exists")):
        return
    if "kind" in wanted:
        add(subject, "kind", fact.get("kind") == wanted["kind"], wanted["kind"], fact.get("kind"), *here, "kind")
    content = fact.get("content")
    if "content" in wanted:
        add(subject, "content", content == str(wanted["content"]), _show(str(wanted["content"])), _show(content),
            *here, "content")
    if "contains" in wanted:
        add(subject, "contains", content is not None and str(wanted["contains"]) in content,
            f"text containing {_show(str(wanted['contains']))}", _show(content), *here, "contains")
    if "matches" in wanted:
        ok = content is not None and re.search(str(wanted["matches"]), content, re.MULTILINE) is not None
        add(subject, "matches", ok, f"a line matching /{wanted['matches']}/", _show(content), *here, "matches")
    if "mode" in wanted:
        mode = f"{parse_mode(raw_mode if raw_mode is not None else wanted['mode']):04o}"
        add(subject, "mode", fact.get("mode") == mode, mode, fact.get("mode", "?"), *here, "mode")
    for key in ("owner", "group", "target"):
        if key in wanted:
            add(subject, key, fact.get(key) == str(wanted[key]), str(wanted[key]), str(fact.get(key)), *here, key)


def _user(add, name: str, wanted: dict, fact: dict) -> None:
    subject, here = f"user {name}", ("users", name)
    exists = wanted.get("exists", True)
    add(subject, "exists", fact.get("exists") == exists, "present" if exists else "absent",
        "present" if fact.get("exists") else "absent", *here)
    if not (exists and fact.get("exists")):
        return
    for key in ("uid", "shell", "home", "gecos", "primary_group", "password"):
        if key in wanted:
            add(subject, key, str(fact.get(key)) == str(wanted[key]), str(wanted[key]), str(fact.get(key)), *here, key)
    if "groups" in wanted:
        listed = wanted["groups"] if isinstance(wanted["groups"], list) else str(wanted["groups"]).split(",")
        missing = [g.strip() for g in listed if g.strip() not in fact.get("groups", [])]
        add(subject, "groups", not missing, f"member of {', '.join(g.strip() for g in listed)}",
            f"member of {', '.join(fact.get('groups') or []) or 'no group'}" +
            (f" (not of {', '.join(missing)})" if missing else ""), *here, "groups")
    if "sudo" in wanted:
        rules = fact.get("sudo") or []
        if isinstance(wanted["sudo"], bool):
            add(subject, "sudo", bool(rules) == wanted["sudo"], "a sudo rule" if wanted["sudo"] else "no sudo rule",
                "; ".join(rules) or "no sudo rule", *here, "sudo")
        else:
            owned = {_squash(" ".join(rule.split()[1:])) for rule in rules}
            for rule in wanted["sudo"] if isinstance(wanted["sudo"], list) else [wanted["sudo"]]:
                add(subject, "sudo", _squash(str(rule)) in owned, f"sudo rule {rule!r}",
                    "; ".join(rules) or "no sudo rule", *here, "sudo")
    if "authorized_keys" in wanted:
        have = {_key_blob(line) for line in fact.get("authorized_keys") or []}
        for key in wanted["authorized_keys"] or []:
            blob = _key_blob(str(key))
            short = f"{blob[0]} ...{blob[1][-12:]}" if blob else _show(str(key), 40)
            add(subject, "authorized key", blob in have, short,
                f"{len(have - {None})} key(s), not this one" if blob not in have else "it", *here, "authorized_keys")


def _mount(add, path: str, wanted: Any, fact: dict) -> None:
    subject, here = f"mount {path}", ("mounts", path)
    if wanted is False:
        add(subject, "mounted", not fact.get("mounted"), "not mounted",
            f"{fact.get('source')} ({fact.get('fstype')})" if fact.get("mounted") else "not mounted", *here)
        return
    add(subject, "mounted", bool(fact.get("mounted")), "mounted", "mounted" if fact.get("mounted") else "not mounted",
        *here)
    if fact.get("mounted"):
        for key in ("source", "fstype"):
            if key in wanted:
                add(subject, key, fact.get(key) == str(wanted[key]), str(wanted[key]), str(fact.get(key)), *here, key)
        if "options" in wanted:
            options = set(fact.get("options") or []) | set(fact.get("super_options") or [])
            listed = wanted["options"] if isinstance(wanted["options"], list) else str(wanted["options"]).split(",")
            missing = [o for o in listed if o not in options]
            add(subject, "options", not missing, ",".join(listed), ",".join(fact.get("options") or []),
                *here, "options")
    if "fstab" in wanted:
        entry = fact.get("fstab")
        add(subject, "fstab", bool(entry) == bool(wanted["fstab"]), "an fstab entry" if wanted["fstab"] else
            "no fstab entry", " ".join(entry) if entry else "no fstab entry", *here, "fstab")


def _command(add, index: int, command: dict, fact: dict) -> None:
    run = command["run"]
    subject = f"command {index + 1} ({command.get('name') or _show(run, 50)})"
    here = ("commands", index)
    if fact.get("exit") is None:
        add(subject, "runs", False, "to finish", fact.get("error", "no result"), *here)
        return
    expected_exit = command.get("exit", 0)
    add(subject, "exit", fact["exit"] == expected_exit, str(expected_exit),
        f"{fact['exit']} (stderr: {_show(fact.get('stderr', '').strip(), 80)})" if fact["exit"] != expected_exit
        else str(fact["exit"]), *here, "exit")
    for stream in ("stdout", "stderr"):
        text = fact.get(stream, "")
        if stream in command:
            add(subject, stream, str(command[stream]) in text, f"{stream} containing {_show(str(command[stream]))}",
                _show(text), *here, stream)
        if f"{stream}_is" in command:
            wanted = str(command[f"{stream}_is"])
            add(subject, f"{stream}_is", text.rstrip("\n") == wanted.rstrip("\n"), _show(wanted), _show(text),
                *here, f"{stream}_is")
        if f"{stream}_matches" in command:
            pattern = str(command[f"{stream}_matches"])
            add(subject, f"{stream}_matches", re.search(pattern, text, re.MULTILINE) is not None,
                f"{stream} matching /{pattern}/", _show(text), *here, f"{stream}_matches")


def summary(checks: list[Check]) -> str:
    failed = [c for c in checks if not c.ok]
    lines = [f"checks: {len(checks) - len(failed)} passed, {len(failed)} failed"]
    lines.extend("  " + c.describe() for c in failed)
    return "\n".join(lines)
