"""The lab's network for tries (lab images only): up in the snapshot, taken down where a try changed it.

Run by the guest's own python3 (standard library only, Python 3.9+), from ``labguest.py``.

A try would otherwise pay the image's whole ``networking.service`` after the agent's local stage
(ifupdown, its hooks and DHCP: 6 to 8 s under TCG). So a snapshot boot brings the image's network
up before it is saved (``bring_up``): the configuration the image has, plus DHCP on its one NIC
when nothing configures it (what the agent writes when the seed gives no network configuration),
raised with ``ifup`` from a private copy of that configuration. In a try, ``networking.service``
starts after the agent's local stage as on any boot, and first asks for ``reconcile`` (a drop-in
the lab's generator writes on snapshot boots only: a shell writes to a pipe the try's exec loop,
already running, reads): each interface that is up is compared, as ifupdown
reads it (its classes, then each stanza's family, method and options in order), with what the
agent has just written. One defined the same way stays up; one whose definition changed or went
is taken down with its old definition, so ``ifup -a`` brings it up again with the new one, DHCP
and hooks paid as in a real boot. When every interface ``ifup -a`` would raise (the ``auto``
class) was kept, it would find each configured and do nothing: the answer is ``kept`` and the
drop-in leaves it out (``"ifup": false``). What was kept and what was taken down goes to
``/run/cloudseed-lab/network.json`` for the try's report.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import time

NET_DIR = "/run/cloudseed-lab/net"
PRIVATE = NET_DIR + "/interfaces"  # what the snapshot raised its interfaces with
HOOKS = NET_DIR + "/hooks.json"  # ifup's hooks as the snapshot had them
HOOK_DIRS = ("/etc/network/if-pre-up.d", "/etc/network/if-up.d")  # what `ifup -a` runs for "--all" too
CHECK, DONE = NET_DIR + "/check", NET_DIR + "/done"  # networking.service's first step asks, and waits
VERDICT = "/run/cloudseed-lab/network.json"
INTERFACES = "/etc/network/interfaces"
STATE = "/run/network/ifstate"  # ifupdown 0.8's record of what is up
_CLASS_WORDS = {"auto": "auto", "allow-auto": "auto"}
_RUN_PARTS_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")


class Config:
    """An ifupdown configuration as ``ifup`` reads it: class members and each interface's stanzas."""

    def __init__(self) -> None:
        self.classes: dict[str, list[str]] = {}
        self.stanzas: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
        self.mappings = False  # a mapping stanza: names resolve by running scripts; never compared

    def definition(self, name: str) -> tuple:
        """What ifupdown would do with ``name``: the classes naming it and its stanzas, in order (a
        stanza written twice counts once: the image's ``lo`` and the agent's are the same one)."""
        classes = tuple(sorted(c for c, names in self.classes.items() if name in names))
        return classes, tuple(dict.fromkeys(self.stanzas.get(name, ())))

    def text(self) -> str:
        """The configuration as one self-contained interfaces(5) file."""
        lines = []
        for name, stanzas in self.stanzas.items():
            for klass, names in sorted(self.classes.items()):
                if name in names:
                    lines.append(f"{'auto' if klass == 'auto' else 'allow-' + klass} {name}")
            for family, method, options in stanzas:
                lines.append(f"iface {name} {family} {method}")
                lines += [f"    {option}" for option in options]
            lines.append("")
        return "\n".join(lines)


def _logical_lines(path: str) -> list[str]:
    """The file's lines with continuations joined and comments and blank lines dropped."""
    with open(path, errors="replace") as handle:
        raw = handle.read().split("\n")
    out, pending = [], ""
    for line in raw:
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            out.append(" ".join(stripped.split()))
    if pending.strip():
        out.append(" ".join(pending.split()))
    return out


def parse(path: str = INTERFACES, into: Config | None = None, depth: int = 0) -> Config:
    """Read ``path`` and what it sources, as ifupdown does."""
    config = into if into is not None else Config()
    if depth > 10:
        return config
    current: list | None = None
    base = os.path.dirname(path)
    for line in _logical_lines(path):
        words = line.split(" ")
        keyword = words[0]
        if keyword == "iface" and len(words) >= 4:
            current = []
            config.stanzas.setdefault(words[1], []).append((words[2], words[3], current))  # type: ignore[arg-type]
        elif keyword == "mapping":
            config.mappings, current = True, None
        elif keyword in _CLASS_WORDS or keyword.startswith("allow-"):
            klass = _CLASS_WORDS.get(keyword, keyword[len("allow-"):])
            names = config.classes.setdefault(klass, [])
            names += [n for n in words[1:] if n not in names]
            current = None
        elif keyword == "source" and len(words) > 1:
            for pattern in words[1:]:
                for found in sorted(glob.glob(os.path.join(base, pattern))):
                    if os.path.isfile(found):
                        parse(found, config, depth + 1)
            current = None
        elif keyword in ("source-directory", "source-dir") and len(words) > 1:
            directory = os.path.join(base, words[1])
            for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
                if _RUN_PARTS_NAME.match(name) and os.path.isfile(os.path.join(directory, name)):
                    parse(os.path.join(directory, name), config, depth + 1)
            current = None
        elif keyword in ("no-auto-down", "no-scripts", "rename"):
            current = None  # interface lists with a meaning of their own: compared as options of none
            config.classes.setdefault(keyword, []).extend(words[1:])
        elif current is not None:
            current.append(line)
    if depth == 0:
        for name, stanzas in config.stanzas.items():
            config.stanzas[name] = [(family, method, tuple(options)) for family, method, options in stanzas]
    return config


def _up_now() -> list[str]:
    """The interfaces ifupdown's state records as configured: its state file as ``ifquery --state``
    reads it (``name=logical-name`` lines; no process under emulation), else ``ifquery`` itself."""
    try:
        with open(STATE) as handle:
            lines = handle.read().splitlines()
    except OSError:
        proc = subprocess.run(["ifquery", "--state"], capture_output=True, text=True, check=False)
        lines = proc.stdout.splitlines()
    return [line.split("=", 1)[0] for line in lines if "=" in line]


def hooks() -> list[list]:
    """The scripts ``ifup`` runs before and after raising (also once for ``--all`` under ``ifup -a``,
    with ``ADDRFAM=meta``), as name, size and time."""
    found = []
    for directory in HOOK_DIRS:
        for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
            try:
                info = os.stat(os.path.join(directory, name))
            except OSError:
                continue
            found.append([os.path.join(directory, name), info.st_size, info.st_mtime_ns])
    return found


def _nic() -> str | None:
    """The machine's one physical NIC (the lab gives each VM one)."""
    for path in sorted(glob.glob("/sys/class/net/*/device")):
        return path.split("/")[-2]
    return None


def _to_root_cgroup() -> None:
    """Run outside the gate's unit, so that the DHCP client outlives it (as networking.service's does)."""
    try:
        with open("/sys/fs/cgroup/cgroup.procs", "w") as handle:
            handle.write(str(os.getpid()))
    except OSError:
        pass


def snapshot_config(nic: str | None, interfaces: str = INTERFACES) -> Config:
    """The image's configuration, with DHCP on ``nic`` when nothing configures it (what the agent
    writes when the seed gives no network configuration)."""
    config = parse(interfaces)
    if nic and nic not in config.stanzas:
        config.classes.setdefault("auto", []).append(nic)
        config.stanzas[nic] = [("inet", "dhcp", ())]
    return config


def changed(before: Config, now: Config, up: list[str]) -> tuple[list[str], list[str]]:
    """(kept, changed) of the interfaces ``up``: changed when ``now`` defines one otherwise than
    ``before`` (or not at all, or through a mapping, which is never taken as the same)."""
    kept, down = [], []
    for name in up:
        same = name in before.stanzas and not (before.mappings or now.mappings)
        (kept if same and before.definition(name) == now.definition(name) else down).append(name)
    return kept, down


def verdict_for(before: Config, now: Config, up: list[str]) -> dict:
    """What a try does with the interfaces ``up``: kept, restarted (defined otherwise: ``ifup -a``
    raises them again) or removed (no longer defined: they stay down, as on a real boot)."""
    kept, down = changed(before, now, up)
    # ifup -a raises the "auto" class: with each of them kept, it would find all configured and do
    # nothing but run its hooks for "--all" (reconcile: the image's own, which the snapshot had), so
    # networking.service leaves it out (its drop-in reads the answer "kept")
    idle = not down and not now.mappings and set(now.classes.get("auto", ())) <= set(kept)
    return {"kept": sorted(kept), "restarted": sorted(n for n in down if n in now.stanzas),
            "removed": sorted(n for n in down if n not in now.stanzas), "ifup": not idle}


def bring_up(console) -> dict:
    """Raise the image's network for the snapshot (see the file's docstring); what was raised."""
    if not (os.path.exists(INTERFACES) and os.path.exists("/sbin/ifup")):
        return {"up": [], "why": "no ifupdown configuration in the image"}
    config = snapshot_config(_nic())
    os.makedirs(NET_DIR, exist_ok=True)
    with open(PRIVATE, "w") as handle:
        handle.write(config.text())
    started = time.monotonic()
    proc = subprocess.run(["ifup", "-a", "-i", PRIVATE], capture_output=True, text=True, check=False,
                          preexec_fn=_to_root_cgroup)
    up = _up_now()
    if proc.returncode != 0:
        subprocess.run(["ifdown", "-a", "--force", "-i", PRIVATE], capture_output=True, check=False)
        os.unlink(PRIVATE)
        console(f"network: not raised for the snapshot (ifup exited {proc.returncode}: "
                f"{(proc.stderr or proc.stdout).strip()[-300:]})")
        return {"up": [], "why": f"ifup exited {proc.returncode}"}
    with open(HOOKS, "w") as handle:
        json.dump(hooks(), handle)
    for fifo in (CHECK, DONE):
        os.mkfifo(fifo, 0o600)
    console(f"network: {', '.join(up)} up for the snapshot in {time.monotonic() - started:.1f}s")
    return {"up": up}


def answer_check(console) -> None:
    """In the try's exec loop (already running: no interpreter starts on networking's path): wait for
    networking.service's first step to ask (a line on ``CHECK``), reconcile, answer on ``DONE``.
    The pipes go with the answer, so a later restart of networking asks nobody."""
    if not os.path.exists(CHECK):
        return
    with open(CHECK) as ask:
        ask.read()
    answer = "run"  # ifup -a as the unit has it
    try:
        if not reconcile(console).get("ifup", True):
            answer = "kept"
    except Exception as e:  # noqa: BLE001 - networking must go on; the report says what failed
        console(f"network: the check failed ({type(e).__name__}: {e})")
    finally:
        os.unlink(CHECK)
        with open(DONE, "w") as done:
            done.write(answer + "\n")
        os.unlink(DONE)


def no_check() -> None:
    """A try without the exec loop: remove the pipes, so networking.service asks nobody and waits for
    no one (its drop-in then runs ``ifup -a`` as the unit has it)."""
    for fifo in (CHECK, DONE):
        if os.path.exists(fifo):
            os.unlink(fifo)


def _hooks_then() -> list | None:
    try:
        with open(HOOKS) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def reconcile(console) -> dict:
    """At a try's networking start: take down what the agent's configuration changed (docstring)."""
    if not os.path.exists(PRIVATE):
        return {}
    started = time.monotonic()
    up = _up_now()
    try:
        verdict = verdict_for(parse(PRIVATE), parse(INTERFACES), up)
    except (OSError, ValueError) as e:  # unreadable: nothing counts as the same, all is raised again
        verdict = {"kept": [], "restarted": sorted(up), "removed": [], "ifup": True,
                   "error": f"{type(e).__name__}: {e}"}
    if not verdict["ifup"] and _hooks_then() != hooks():  # a hook added or changed: `ifup -a` runs it for --all
        verdict["ifup"] = True
    down = verdict["restarted"] + verdict["removed"]
    for name in reversed([n for n in up if n in down]):
        subprocess.run(["ifdown", "--force", "-i", PRIVATE, name], capture_output=True, check=False)
    verdict["seconds"] = round(time.monotonic() - started, 3)
    os.makedirs(os.path.dirname(VERDICT), exist_ok=True)
    with open(VERDICT, "w") as handle:
        json.dump(verdict, handle)
    os.unlink(PRIVATE)  # a later restart of networking.service is an ordinary one
    said = []
    if verdict["kept"]:
        said.append(f"{', '.join(verdict['kept'])} kept up from the snapshot (configuration unchanged"
                    + ("" if verdict["ifup"] else "; nothing for ifup -a to raise") + ")")
    if verdict["restarted"]:
        said.append(f"{', '.join(verdict['restarted'])} changed: taken down, networking.service raises it again")
    if verdict["removed"]:
        said.append(f"{', '.join(verdict['removed'])} no longer configured: taken down")
    console("network: " + "; ".join(said))
    return verdict
