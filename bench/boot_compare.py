#!/usr/bin/env python3
"""Boot-time benchmark: the same lab image with no agent, with cloudseed and with Debian's cloud-init.

Boots each image N rounds, alternating in one run (TCG on these machines); each round is a first
boot of a fresh instance and, with ``--reboot``, a second boot of the same disk. Same NoCloud seed
for all (the image without an agent ignores it; a small unit runs ``ssh-keygen -A`` there, as a
plain image needs). User-data as in LAB-NOTES: hostname/fqdn/manage_etc_hosts, a sudo user with
an ed25519 key, 3 write_files, 1 bootcmd, 2 runcmd.

Measured from outside the guest, seconds after power-on (host clock, console lines timestamped
as they arrive): ``sysinit.target`` reached, SSH answering, every host key type the image's sshd
offers served (``ssh-keyscan`` of rsa, ecdsa and ed25519), boot finished (the lab collector's
line, after ``multi-user.target`` and, with an agent, its final stage); plus the agent's own stage
times. Reported as medians, and as ratios and differences against the image without an agent.

"Boot finished" is the later of ``multi-user.target`` reached and the agent's final message (both
console lines), so it does not count the lab collector's own work (``cloudseed status`` or
``cloud-init status``: two Python starts after the agent is done, which the image without an agent
does not have); the collector's line is reported beside it as "collector done". The image without
an agent has the same DHCP interface configured as the agents write (``lab/agent_install.py``).

Usage: .venv/bin/python bench/boot_compare.py [-n 3] [--agents none,cloudseed,reference] [--reboot]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from cloudseed.lab.accel import choose_accel
from cloudseed.lab.agent_report import summarize
from cloudseed.lab.image import lab_image
from cloudseed.lab.session import BootResult, run_boot
from cloudseed.provider.seeds.build import build_seed
from cloudseed.provider.seeds.spec import InstanceSpec, SshKey

SYSINIT = re.compile(r"Reached target (sysinit\.target|System Initialization)")
MULTI_USER = re.compile(r"Reached target (multi-user\.target|Multi-User System)")
KEY_TYPES = ("rsa", "ecdsa", "ed25519")


def user_data(key: str) -> bytes:
    return f"""#cloud-config
hostname: bench
fqdn: bench.example.test
manage_etc_hosts: true
users:
  - name: bench
    sudo: ALL=(ALL) NOPASSWD:ALL
    shell: /bin/bash
    ssh_authorized_keys: [{key}]
write_files:
  - {{path: /etc/bench/a.txt, content: "a\\n"}}
  - {{path: /etc/bench/b.txt, content: "b\\n", permissions: '0600'}}
  - {{path: /etc/bench/c.txt, content: "c\\n"}}
bootcmd:
  - echo boot > /var/tmp/bench-boot
runcmd:
  - echo one > /var/tmp/bench-run1
  - echo two > /var/tmp/bench-run2
""".encode()


def stage_seconds(result: BootResult) -> dict[str, float]:
    """Per-stage agent time: cloudseed's own markers, or the stamps of either agent's status."""
    own = {name: t.seconds for name, t in result.stages.items() if t.seconds is not None}
    if own:
        return own
    stages = summarize(result.status, result.result)["stages"]
    return {name: s["seconds"] for name, s in stages.items() if s.get("seconds") is not None}


def console_at(result: BootResult, pattern: re.Pattern) -> float | None:
    """When a console line first matched ``pattern`` (seconds after power-on)."""
    console = result.vm.console if result.vm else None
    for line in list(console.lines) if console else []:
        if pattern.search(line.text):
            return line.at
    return None


def sysinit_at(result: BootResult) -> float | None:
    return console_at(result, SYSINIT)


def finished_at(sample: dict, agent: str) -> float | None:
    """The later of multi-user.target and the agent's final message (None if the agent's is missing).

    systemd does not always print "Reached target multi-user.target" (a getty on the serial
    console can take it over first): then the collector's line stands in for it, an upper bound
    (its unit is ordered after multi-user.target)."""
    multi_user = sample.get("multi_user_at") or sample.get("collected_at")
    if multi_user is None or (agent != "none" and sample.get("agent_done_at") is None):
        return None
    return max(multi_user, sample.get("agent_done_at") or 0.0)


def all_keys_at(result: BootResult, limit: float = 180.0) -> float | None:
    """When sshd first served every key type (seconds after power-on), polling from the host."""
    vm = result.vm
    if vm is None or result.ssh_ready_at is None:
        return None
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and vm.running():
        proc = subprocess.run(["ssh-keyscan", "-T", "5", "-t", ",".join(KEY_TYPES), "-p", str(vm.ssh_port),
                               "127.0.0.1"], capture_output=True, text=True, timeout=30)
        offered = {line.split()[1] for line in proc.stdout.splitlines() if len(line.split()) >= 3}
        if {"ssh-rsa", "ecdsa-sha2-nistp256", "ssh-ed25519"} <= offered:
            return time.monotonic() - vm.started
        time.sleep(0.5)
    return None


def measure(image, workdir: str, accel: str, reason: str, seed: str, timeout: float,
            overlay: str | None = None) -> tuple[dict, BootResult]:
    result = run_boot(image, workdir, accel=accel, accel_reason=reason, seeds=[seed], timeout=timeout,
                      ssh_timeout=90, keep=True, overlay=overlay)
    sample = {"stages": stage_seconds(result), "sysinit_at": sysinit_at(result), "ssh_ready_at": result.ssh_ready_at,
              "multi_user_at": console_at(result, MULTI_USER),
              "collected_at": result.collected_at, "agent_done_at": result.agent_done_at,
              "all_keys_at": all_keys_at(result), "timed_out": result.timed_out}
    sample["finished_at"] = finished_at(sample, image.agent)
    sample["agent_total"] = sum(sample["stages"].values()) if sample["stages"] else None
    if result.vm:
        result.vm.stop()
    return sample, result


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.1f}{unit}"


COLUMNS = (("sysinit_at", "sysinit.target"), ("ssh_ready_at", "SSH ready"), ("all_keys_at", "all host keys"),
           ("finished_at", "boot finished"), ("collected_at", "collector done"), ("agent_total", "agent time"))


def table(title: str, samples: dict[str, list[dict]]) -> list[str]:
    medians = {agent: {key: median([r[key] for r in runs]) for key, _ in COLUMNS} for agent, runs in samples.items()}
    lines = [f"### {title} (medians, seconds after power-on)", "",
             "| agent | " + " | ".join(label for _, label in COLUMNS) + " | finished vs none |",
             "|---" * (len(COLUMNS) + 2) + "|"]
    base = medians.get("none", {})
    for agent, values in medians.items():
        vs = "-"
        if agent != "none" and values["finished_at"] is not None and base.get("finished_at"):
            mine, theirs = values["finished_at"], base["finished_at"]
            vs = f"{mine / theirs:.2f}x ({mine - theirs:+.1f} s)"
        lines.append(f"| {agent} | " + " | ".join(fmt(values[key]) for key, _ in COLUMNS) + f" | {vs} |")
    if base.get("sysinit_at") is not None:
        for agent, values in medians.items():
            if agent != "none" and values["sysinit_at"] is not None:
                later = values["sysinit_at"] - base["sysinit_at"]
                lines.append(f"\n{agent}: sysinit.target {later:+.1f} s against none")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--boots", type=int, default=3, help="rounds per image (default 3)")
    parser.add_argument("--agents", default="none,cloudseed,reference", help="comma list of none, cloudseed, reference")
    parser.add_argument("--reboot", action="store_true", help="also a second boot of each instance")
    parser.add_argument("--json", metavar="FILE", help="also write all samples as JSON")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--tables-from", metavar="FILE", help="only print the tables of a series saved with --json")
    args = parser.parse_args()
    if args.tables_from:
        return tables_from(args.tables_from)
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    work = tempfile.mkdtemp(prefix="bench-boot-")
    print(f"console logs under {work}", flush=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{work}/key"], check=True)
    with open(f"{work}/key.pub") as handle:
        key = handle.read().strip()
    spec = InstanceSpec(instance_id="iid-bench-0001", hostname="bench",
                        ssh_keys=[SshKey("bench", "ed25519", key)], user_data=user_data(key))
    seed = os.path.join(work, "seed.iso")
    build_seed("nocloud", "iso9660", spec, seed)
    images = {agent: lab_image(agent) for agent in agents}
    first = next(iter(images.values()))
    accel, reason = choose_accel("auto", first.kernel, first.initrd)
    load = os.getloadavg()
    print(f"accelerator: {accel} ({reason}); {args.boots} rounds, alternating; load at start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    samples: dict[str, list[dict]] = {agent: [] for agent in agents}
    reboots: dict[str, list[dict]] = {agent: [] for agent in agents}
    for round_number in range(args.boots):
        for agent in agents:
            workdir = os.path.join(work, f"{agent}-{round_number}")
            sample, result = measure(images[agent], workdir, accel, reason, seed, args.timeout)
            samples[agent].append(sample)
            print(f"  {agent:<10} boot {round_number + 1}: sysinit {fmt(sample['sysinit_at'])}, SSH "
                  f"{fmt(sample['ssh_ready_at'])}, all keys {fmt(sample['all_keys_at'])}, finished "
                  f"{fmt(sample['finished_at'])}, collector {fmt(sample['collected_at'])}, agent "
                  f"{fmt(sample['agent_total'])}", flush=True)
            if args.reboot:
                again, _ = measure(images[agent], workdir + "-reboot", accel, reason, seed, args.timeout,
                                   overlay=result.overlay)
                reboots[agent].append(again)
                print(f"  {agent:<10} reboot {round_number + 1}: sysinit {fmt(again['sysinit_at'])}, SSH "
                      f"{fmt(again['ssh_ready_at'])}, all keys {fmt(again['all_keys_at'])}, finished "
                      f"{fmt(again['finished_at'])}, collector {fmt(again['collected_at'])}, agent "
                      f"{fmt(again['agent_total'])}", flush=True)
            if os.path.exists(result.overlay):
                os.unlink(result.overlay)
    end = os.getloadavg()
    print(f"\nload at end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}\n")
    report(samples, reboots if args.reboot else None)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"accel": accel, "load_start": load, "load_end": end, "samples": samples, "reboots": reboots},
                      handle, indent=2)
    return 0


def report(samples: dict[str, list[dict]], reboots: dict[str, list[dict]] | None) -> None:
    print("\n".join(table("first boot", samples)))
    if reboots:
        print()
        print("\n".join(table("reboot of the same instance", reboots)))
    stages = ("local", "network", "config", "final")
    print("\n| agent | " + " | ".join(stages) + " |\n" + "|---" * (len(stages) + 1) + "|")
    for agent, runs in samples.items():
        if agent != "none":
            print(f"| {agent} | " + " | ".join(fmt(median([r['stages'].get(s) for r in runs])) for s in stages) + " |")


def tables_from(path: str) -> int:
    """The tables of a series saved with --json, "boot finished" recomputed from the saved lines."""
    with open(path) as handle:
        saved = json.load(handle)
    for series in (saved["samples"], saved.get("reboots") or {}):
        for agent, runs in series.items():
            for sample in runs:
                sample["finished_at"] = finished_at(sample, agent)
    if saved.get("load_start"):
        print("load at start " + " ".join(f"{v:.2f}" for v in saved["load_start"]) +
              ", at end " + " ".join(f"{v:.2f}" for v in saved["load_end"]) + "\n")
    report(saved["samples"], saved.get("reboots") or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
