#!/usr/bin/env python3
"""Seconds per try of ``cloudseed lab --repeat``: from the new file to the report, restored from a snapshot.

Makes (or finds) the snapshot of the lab image at the point before the agent reads its seed, then
runs N tries of a cloud-config without packages (hostname, a user with sudo and a key, two files,
a runcmd), each with a different hostname, as ``lab --repeat`` does, with ``--expect`` checks of
what the cloud-config did (the facts asked after the agent finished are part of the try). A try's
time runs from reading the files to the report's last fact; its parts: the VM restored and
released, the agent finished (as the guest helper saw it), the checks answered. Stage start
times in the guest, the host's load average and the time the agent recorded for ``users_groups``
(the two users and their sudo rules) are printed beside each try.

With ``--network-change`` each try's network-config defines the NIC otherwise than the snapshot
had it up (its MTU), so the try takes it down and pays networking's DHCP again.

Usage: .venv/bin/python bench/lab_tries.py [-n 5] [--fresh-snapshot] [--datasource nocloud|openstack]
       [--network-change] [--full-boots N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from cloudseed.lab.boots.delivery import Delivery
from cloudseed.lab.boots.tries import TrySession
from cloudseed.lab.images.image import lab_image
from cloudseed.lab.machine.accel import choose_accel
from cloudseed.lab.reports.checks import load

USER_DATA = """#cloud-config
hostname: {host}
users:
  - default
  - name: bench
    shell: /bin/bash
    sudo: ALL=(ALL) NOPASSWD:ALL
    ssh_authorized_keys: [ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBtDGfcIz3AEtrczl+2kH0aC0/6Sd3uxjOeTS6rIcGKZ bench]
write_files:
  - {{path: /etc/bench/a.txt, content: "a\\n"}}
  - {{path: /etc/bench/b.txt, content: "b\\n", permissions: "0600"}}
runcmd:
  - echo ran > /var/tmp/bench-runcmd
"""
EXPECT = """hostname: {host}
files:
  /etc/bench/b.txt: {{content: "b\\n", mode: "0600"}}
  /var/tmp/bench-runcmd: {{content: "ran\\n"}}
users:
  bench: {{shell: /bin/bash, sudo: "ALL=(ALL) NOPASSWD:ALL"}}
"""


NETWORK_CHANGE = """version: 2
ethernets:
  ens3: {{dhcp4: true, mtu: {mtu}}}
"""


def module_seconds(result, module: str) -> str:
    """What the agent recorded for ``module`` in a try ('-' when it has no record)."""
    from cloudseed.lab.reports.agent_report import summarize

    for stage in summarize(result.status, result.result)["stages"].values():
        for entry in stage.get("modules", []):
            if entry.get("name") == module and isinstance(entry.get("seconds"), (int, float)):
                return f"{entry['seconds']:.2f}s"
    return "-"


def full_boot(image, accel: str, reason: str, delivery: Delivery, work: str, number: int) -> str:
    """The same cloud-config in a full boot (the lab without --repeat), as the tries' yardstick."""
    from cloudseed.lab.boots.session import run_boot

    workdir = os.path.join(work, f"boot-{number}")
    started = time.monotonic()
    seeds, _ = delivery.prepare(workdir)
    result = run_boot(image, workdir, accel=accel, accel_reason=reason, seeds=seeds, ssh_timeout=0)
    took = time.monotonic() - started
    finished = f"{result.agent_done_at:.1f}s" if result.agent_done_at is not None else "-"
    return (f"full boot {number}: {took:.1f}s to the report (agent finished {finished} after power-on; "
            f"load {os.getloadavg()[0]:.1f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="tries (default 5)")
    parser.add_argument("--fresh-snapshot", action="store_true", help="make the snapshot again first")
    parser.add_argument("--datasource", default="nocloud", choices=("nocloud", "configdrive", "openstack", "ec2"))
    parser.add_argument("--full-boots", type=int, default=1, help="full boots of the same, for comparison (default 1)")
    parser.add_argument("--network-change", action="store_true",
                        help="each try's network-config changes the NIC (its MTU): the try pays the "
                             "network's restart (default: no network-config, the snapshot's network is kept)")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bench-lab-tries-")
    ud, expect = os.path.join(work, "user-data"), os.path.join(work, "expect.yaml")
    image = lab_image("cloudseed")
    accel, reason = choose_accel("auto", image.kernel, image.initrd)
    with open(expect, "w") as handle:
        handle.write(EXPECT.format(host="bench-0"))
    network_config = os.path.join(work, "network-config") if args.network_change else None
    session = TrySession(image, Delivery(datasource=args.datasource, user_data=ud, network_config=network_config),
                         accel, reason, work,
                         expect=load(expect), say=lambda text: print(f"# {text}", file=sys.stderr))
    if args.fresh_snapshot:
        session.snapshot.discard()
    load_before = os.getloadavg()
    started = time.monotonic()
    session.prepare()
    made = time.monotonic() - started
    state = f"made in {made:.1f}s" if session.snapshot.made_in is not None else "cached"
    print(f"snapshot: {state}; "
          f"{session.snapshot.info}; accelerator {accel}")
    print(f"{'try':>3} {'seconds':>8} {'restored':>9} {'agent done':>11} {'checks':>7}  "
          f"{'local/network/config/final start':<34} load  checks  network  users_groups")
    totals = []
    for number in range(1, args.n + 1):
        host = f"bench-{number}"
        with open(ud, "w") as handle:
            handle.write(USER_DATA.format(host=host))
        with open(expect, "w") as handle:
            handle.write(EXPECT.format(host=host))
        if network_config:
            with open(network_config, "w") as handle:
                handle.write(NETWORK_CHANGE.format(mtu=1400 + number))
        session.expect = load(expect)
        outcome = session.run_try(number)
        stages = "/".join(f"{outcome.result.stages[s].started_at:.1f}" if s in outcome.result.stages and
                          outcome.result.stages[s].started_at is not None else "-"
                          for s in ("local", "network", "config", "final"))
        passed = sum(1 for c in outcome.checks or [] if c.ok)
        network = outcome.network or {}
        net = " ".join(f"{what} {','.join(network[what])}" for what in ("kept", "restarted", "removed")
                       if network.get(what)) or "-"
        print(f"{number:>3} {outcome.seconds:>7.1f}s {outcome.restored_in:>8.1f}s "
              f"{outcome.timings.get('agent', 0):>10.1f}s {outcome.timings.get('checks', 0):>6.1f}s  {stages:<34} "
              f"{os.getloadavg()[0]:.1f}  {passed}/{len(outcome.checks or [])}  {net:>6}  "
              f"{module_seconds(outcome.result, 'users_groups'):>12}"
              + (f"  {outcome.error}" if outcome.error else ""), flush=True)
        totals.append(outcome.seconds)
    print(f"median {statistics.median(totals):.1f}s, min {min(totals):.1f}s, max {max(totals):.1f}s over "
          f"{len(totals)} tries; load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    for number in range(1, args.full_boots + 1):
        print(full_boot(image, accel, reason, session.delivery, work, number), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
