#!/usr/bin/env python3
"""Where a lab boot's time goes: intervals between systemd's console lines, per agent and boot kind.

Reads the console logs ``bench/boot_compare.py`` leaves under its ``/tmp/bench-boot-*`` directory
(one ``<agent>-<round>[-reboot]/console-1.log`` per boot; each line starts with the host's
seconds since power-on) and prints, for first boots and reboots of each agent, the intervals on
the boot's critical path: the generators' phase, udev's coldplug and ``ifupdown-pre``'s settle,
``networking.service``, the agent's network stage before sshd, sshd's start. Each cell lists every
boot's value and the median.

Usage: .venv/bin/python bench/boot_intervals.py /tmp/bench-boot-XXXX [more directories...]
"""

from __future__ import annotations

import glob
import os
import re
import statistics
import sys

# (name, pattern of the first console line that marks it)
MARKS = (
    ("hostname", r"Hostname set to"),
    ("queued", r"Queued start job"),
    ("journald", r"Starting systemd-journald\.service"),
    ("coldplug_done", r"Finished systemd-udev-trig"),
    ("settle_start", r"Starting ifupdown-pre"),
    ("settle_done", r"Finished ifupdown-pre"),
    ("networking_start", r"Starting networking\.service"),
    ("networking_done", r"Finished networking\.service"),
    ("sshd_start", r"Starting ssh\.service"),
    ("sshd_done", r"Started ssh\.service"),
    ("network_stage_start", r"cloudseed: stage network start|running 'init'"),
    ("network_stage_done", r"cloudseed: stage network finished|Finished cloud-init\.service"),
    ("multi_user", r"Reached target multi-user\.target"),
)
INTERVALS = (
    ("generators", "hostname", "queued"),
    ("to journald", "queued", "journald"),
    ("journald to coldplug done", "journald", "coldplug_done"),
    ("ifupdown-pre (settle)", "settle_start", "settle_done"),
    ("settle done to networking", "settle_done", "networking_start"),
    ("networking.service", "networking_start", "networking_done"),
    ("networking to sshd start", "networking_done", "sshd_start"),
    ("sshd start", "sshd_start", "sshd_done"),
    ("agent's network stage", "network_stage_start", "network_stage_done"),
    ("sshd started to multi-user", "sshd_done", "multi_user"),
    ("hostname to multi-user", "hostname", "multi_user"),
)
STAMP = re.compile(r"\[\s*([0-9.]+)\]")


def marks_of(path: str) -> dict[str, float]:
    """The first time each mark's line appears in one console log."""
    found: dict[str, float] = {}
    with open(path, errors="replace") as handle:
        for line in handle:
            stamp = STAMP.match(line)
            if not stamp:
                continue
            for name, pattern in MARKS:
                if name not in found and re.search(pattern, line):
                    found[name] = float(stamp.group(1))
    return found


def intervals_of(path: str) -> dict[str, float]:
    """One boot's intervals (seconds, by label) from its console log; those whose marks are missing left out."""
    found = marks_of(path)
    return {label: round(found[end] - found[start], 2) for label, start, end in INTERVALS
            if start in found and end in found}


def main(directories: list[str]) -> int:
    if not directories:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    groups: dict[tuple[str, str], list[dict[str, float]]] = {}
    for directory in directories:
        for path in sorted(glob.glob(os.path.join(directory, "*", "console-1.log"))):
            boot = os.path.basename(os.path.dirname(path))
            kind = "reboot" if boot.endswith("-reboot") else "first boot"
            groups.setdefault((boot.split("-")[0], kind), []).append(marks_of(path))
    if not groups:
        print(f"no console logs under {', '.join(directories)}", file=sys.stderr)
        return 1
    for (agent, kind), boots in sorted(groups.items(), key=lambda item: (item[0][1], item[0][0])):
        print(f"{agent}, {kind} ({len(boots)} boots)")
        for label, start, end in INTERVALS:
            values = [round(b[end] - b[start], 2) for b in boots if start in b and end in b]
            middle = f"{statistics.median(values):.2f}" if values else "-"
            print(f"  {label:<28} median {middle:>6}   {values}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
