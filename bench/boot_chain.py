#!/usr/bin/env python3
"""What a lab boot waited for: systemd's critical chain and the unit timeline, read in the guest.

Boots one instance of the benchmark's image (``boot_compare.py``'s seed and user-data), first boot
and with ``--reboot`` a second boot of the same disk, logs in once the agent is done (the seed's
user, its key, ``sudo``) and prints, for each boot:

- ``systemd-analyze critical-chain`` of the units that decide "boot finished" (``multi-user.target``,
  the agent's final unit) and of ``ssh.service``: each unit's start and how long it took to become
  active, which unit each waited for;
- the journal's unit start/finish lines (monotonic seconds since the kernel started) of the units on
  the way to sshd and networking, the agent's stages and the host key generators;
- the agent's own module timings (``cloudseed analyze blame``) and its log, whose times (to the
  millisecond) show what a stage does between and around its modules.

For finding where the time goes, not for figures: the login and the commands run after the boot,
and one boot is one sample (``boot_compare.py`` measures). Image without an agent: no user to log
in as, so only its console intervals (``boot_intervals.py``) are printed.

Usage: .venv/bin/python bench/boot_chain.py [--agent cloudseed] [--reboot] [--keep-logs]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout, for cloudseed

from boot_compare import bench_seed  # noqa: E402  (bench/ is the script's directory)
from boot_intervals import intervals_of  # noqa: E402

from cloudseed.lab.boots.session import run_boot  # noqa: E402
from cloudseed.lab.images.image import lab_image  # noqa: E402
from cloudseed.lab.machine.accel import choose_accel  # noqa: E402

COMMANDS = (
    ("critical chain: multi-user.target", "systemd-analyze critical-chain --no-pager multi-user.target"),
    ("critical chain: the agent's final unit", "systemd-analyze critical-chain --no-pager cloudseed-final.service"),
    ("critical chain: ssh.service", "systemd-analyze critical-chain --no-pager ssh.service"),
    ("slowest units", "systemd-analyze blame --no-pager | head -20"),
    ("timeline (monotonic seconds since the kernel started)",
     "journalctl -b -o short-monotonic --no-pager | grep -E '(Start|Finish|Reached|Stopp|Listening|cloudseed|"
     "ssh-keygen|Server listening|DHCP|dhclient|bound to)' | grep -vE 'session-|user@|user-runtime' | head -150"),
    ("the agent's module timings", "cloudseed analyze blame 2>&1 | head -40"),
    ("the agent's log of this boot (milliseconds: the gaps between modules, the stage's work around them)",
     "grep -v ' DEBUG: ' /var/log/cloudseed.log | tail -n 150"),
    ("CPU time per unit (the agent's unit holds its key generators)",
     "for u in cloudseed-local.service networking.service systemd-udevd.service systemd-udev-trigger.service "
     "ifupdown-pre.service ssh.service systemd-journald.service cloudseed-lab-collect.service; do "
     "printf '%-34s %s\\n' $u \"$(systemctl show -P CPUUsageNSec $u)\"; done; cat /proc/pressure/cpu 2>/dev/null"),
    ("processes that ran longest (ps, CPU seconds)", "ps -eo cputime,etime,ni,cls,comm --sort=-cputime | head -15"),
)


def in_guest(port: int, key: str, command: str) -> str:
    ssh = ["ssh", "-q", "-i", key, "-p", str(port), "-o", "StrictHostKeyChecking=no",
           "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20",
           "bench@127.0.0.1", f"sudo sh -c {shlex.quote(command)}"]
    proc = subprocess.run(ssh, capture_output=True, text=True, timeout=120)
    return (proc.stdout + proc.stderr).rstrip()


# a stage run again in the booted guest under cProfile (its own process: imports included)
STAGE_COMMANDS = {"network": "init", "config": "modules --mode config", "final": "modules --mode final"}


def profile_command(stage: str) -> str:
    return (f"python3 -m cProfile -o /run/boot-chain.prof -m cloudseed {STAGE_COMMANDS[stage]} >/dev/null 2>&1; "
            "python3 -c \"import pstats; pstats.Stats('/run/boot-chain.prof').sort_stats('cumulative')"
            ".print_stats(60)\" | tail -n +6")


def show(title: str, result, key: str, agent: str, work: str, profile: str | None = None) -> None:
    print(f"\n======== {title}: ssh ready {result.ssh_ready_at}, agent done {result.agent_done_at}, "
          f"collector {result.collected_at}")
    if os.path.exists(result.console_log):
        for label, value in intervals_of(result.console_log).items():
            print(f"  {label:<28} {value:6.2f}")
    if agent == "none" or result.vm is None or not result.vm.running():
        return
    for label, command in COMMANDS:
        print(f"\n---- {label}\n{in_guest(result.vm.ssh_port, key, command)}")
    if profile and agent == "cloudseed":
        print(f"\n---- the {profile} stage run again under cProfile (its modules' semaphores hold: their "
              f"per-instance work is skipped)\n{in_guest(result.vm.ssh_port, key, profile_command(profile))}")
    journal = os.path.join(work, f"{title.replace(' ', '-')}-journal.txt")
    with open(journal, "w") as handle:
        handle.write(in_guest(result.vm.ssh_port, key, "journalctl -b -o short-monotonic --no-pager") + "\n")
    print(f"\n(the whole journal: {journal})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="cloudseed", help="none, cloudseed or reference (default cloudseed)")
    parser.add_argument("--reboot", action="store_true", help="also the second boot of the same disk")
    parser.add_argument("--keep-logs", action="store_true", help="keep the console logs and journals")
    parser.add_argument("--profile", nargs="?", const="final", choices=sorted(STAGE_COMMANDS),
                        help="then run one of cloudseed's stages again in the guest under cProfile (default final)")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="boot-chain-")
    key = f"{work}/key"
    seed = bench_seed(work)
    image = lab_image(args.agent)
    accel, reason = choose_accel("auto", image.kernel, image.initrd)
    print(f"accelerator: {accel} ({reason}); console logs under {work}; load {os.getloadavg()[0]:.2f}")
    overlay = None
    try:
        titles = ("first boot", "reboot") if args.reboot else ("first boot",)
        for title in titles:
            result = run_boot(image, os.path.join(work, title.replace(" ", "-")), accel=accel, accel_reason=reason,
                              seeds=[seed], timeout=args.timeout, ssh_timeout=90, keep=True, overlay=overlay)
            try:
                # the stage run again only after the last boot: the reboot's disk stays as the first boot left it
                show(title, result, key, args.agent, work, args.profile if title == titles[-1] else None)
            finally:
                if result.vm:
                    result.vm.stop()
            overlay = result.overlay
    finally:
        if overlay and os.path.exists(overlay):
            os.unlink(overlay)
        if not args.keep_logs:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
