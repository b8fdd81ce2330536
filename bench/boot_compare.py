#!/usr/bin/env python3
"""Boot-time benchmark: the same lab image with Debian's cloud-init and with cloudseed, same seed.

Boots each image N times, alternating, in one run (TCG on these machines), and reports medians
of: agent time per stage, total agent time, agent finished after power-on, and power-on to SSH
ready. User-data as in LAB-NOTES: hostname/fqdn/manage_etc_hosts, a sudo user with an ed25519
key, 3 write_files, 1 bootcmd, 2 runcmd. Usage: .venv/bin/python bench/boot_compare.py [-n 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from cloudseed.lab.accel import choose_accel
from cloudseed.lab.image import lab_image
from cloudseed.lab.session import BootResult, run_boot
from cloudseed.provider.seeds.build import build_seed
from cloudseed.provider.seeds.spec import InstanceSpec, SshKey

REFERENCE_STAGES = {"init-local": "local", "init": "network", "modules-config": "config",
                    "modules-final": "final"}


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
    """Per-stage agent time: cloudseed's own markers, or the reference's status.json stamps."""
    own = {name: t.seconds for name, t in result.stages.items() if t.seconds is not None}
    if own:
        return own
    v1 = (result.status or {}).get("v1", {}) if isinstance(result.status, dict) else {}
    times = {}
    for ref_name, name in REFERENCE_STAGES.items():
        stage = v1.get(ref_name) or {}
        if stage.get("start") and stage.get("finished"):
            times[name] = float(stage["finished"]) - float(stage["start"])
    return times


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--boots", type=int, default=3, help="boots per image (default 3)")
    parser.add_argument("--agents", default="reference,cloudseed", help="comma list (also: none)")
    parser.add_argument("--json", metavar="FILE", help="also write all samples as JSON")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    work = tempfile.mkdtemp(prefix="bench-boot-")
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
    print(f"accelerator: {accel} ({reason}); {args.boots} boots per image, alternating", flush=True)
    samples: dict[str, list[dict]] = {agent: [] for agent in agents}
    for round_number in range(args.boots):
        for agent in agents:
            workdir = os.path.join(work, f"{agent}-{round_number}")
            result = run_boot(images[agent], workdir, accel=accel, accel_reason=reason, seeds=[seed],
                              timeout=args.timeout, ssh_timeout=60)
            sample = {"stages": stage_seconds(result), "agent_done_at": result.agent_done_at,
                      "ssh_ready_at": result.ssh_ready_at, "timed_out": result.timed_out}
            sample["agent_total"] = sum(sample["stages"].values()) if sample["stages"] else None
            samples[agent].append(sample)
            print(f"  {agent:<10} boot {round_number + 1}: agent {fmt(sample['agent_total'])}s, "
                  f"finished at {fmt(result.agent_done_at)}s, SSH at {fmt(result.ssh_ready_at)}s", flush=True)
            if os.path.exists(result.overlay):
                os.unlink(result.overlay)
    print()
    stages = ("local", "network", "config", "final")
    print("| agent | " + " | ".join(stages) + " | agent total | finished after power-on | SSH ready |")
    print("|---" * (len(stages) + 4) + "|")
    for agent, runs in samples.items():
        cells = [fmt(median([r["stages"].get(s) for r in runs])) for s in stages]
        print(f"| {agent} | " + " | ".join(cells) + f" | {fmt(median([r['agent_total'] for r in runs]))} | "
              f"{fmt(median([r['agent_done_at'] for r in runs]))} | {fmt(median([r['ssh_ready_at'] for r in runs]))} |")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"accel": accel, "samples": samples}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
