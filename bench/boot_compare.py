#!/usr/bin/env python3
"""Boot-time benchmark: the same lab image with no agent, with cloudseed and with Debian's cloud-init.

Boots each image N rounds, alternating in one run (TCG on these machines); each round is a first
boot of a fresh instance and, with ``--reboot``, a second boot of the same disk. Same NoCloud seed
for all (the image without an agent ignores it; a small unit runs ``ssh-keygen -A`` there, as a
plain image needs). User-data as in LAB-NOTES: hostname/fqdn/manage_etc_hosts, a sudo user with
an ed25519 key, 3 write_files, 1 bootcmd, 2 runcmd.

Measured from outside the guest, seconds after power-on (host clock, console lines timestamped
as they arrive): ``sysinit.target`` reached, SSH answering (when sshd's banner first arrives:
``cloudseed/lab/machine/ssh_probe.py``, read within about 0.3 s of sshd listening), sshd started
(the arrival of systemd's "Started ssh.service" console line: the in-guest reading beside it),
every host key type the image's sshd offers served (``ssh-keyscan`` of rsa, ecdsa and ed25519),
boot finished (the lab collector's line, after ``multi-user.target`` and, with an agent, its final
stage); plus the agent's own stage times. Reported as medians, and as ratios and differences
against the image without an agent.

"Boot finished" is the later of ``multi-user.target`` reached and the agent's final message (both
console lines), so it does not count the lab collector's own work (``cloudseed status`` or
``cloud-init status``: two Python starts after the agent is done, which the image without an agent
does not have); the collector's line is reported beside it as "collector done". The image without
an agent has the same DHCP interface configured as the agents write (``lab/images/agent_install.py``).

Each boot's own intervals (``boot_intervals.py``: generators, settle, networking, the agent's
network stage, sshd's start...) are printed beside it and kept. Differences against the image
without an agent are paired by round (each round boots every image once, one after the other, so
a round's boots share the machine's load) and reported with their spread and a 95% confidence
interval of the mean (Student's t); ``--until-ci S`` goes on after ``-n`` rounds until that
interval is within +-S seconds for every watched difference (``--ci-metrics``, ``--ci-agent``, of
first boots and reboots), or ``--max-rounds`` is reached, and says which.

Usage: .venv/bin/python bench/boot_compare.py [-n 3] [--agents none,cloudseed,reference] [--reboot]
       [--until-ci 0.5 --max-rounds 12] [--json bench/results/FILE.json]
       .venv/bin/python bench/boot_compare.py --merge PART1.json PART2.json... [--json bench/results/FILE.json]
       (a series split across holds of a quiet machine: its parts' rounds as one series)
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

from boot_intervals import intervals_of

from cloudseed.lab.boots.session import BootResult, run_boot
from cloudseed.lab.images.image import lab_image
from cloudseed.lab.machine.accel import choose_accel
from cloudseed.lab.machine.console import sshd_started_at
from cloudseed.lab.reports.agent_report import summarize
from cloudseed.provider.seeds.build import build_seed
from cloudseed.provider.seeds.spec import InstanceSpec, SshKey

SYSINIT = re.compile(r"Reached target (sysinit\.target|System Initialization)")
MULTI_USER = re.compile(r"Reached target (multi-user\.target|Multi-User System)")
HOSTNAME = re.compile(r"systemd\[1\]: Hostname set to")  # systemd's first line after the initramfs
KEY_TYPES = ("rsa", "ecdsa", "ed25519")


def bench_seed(work: str) -> str:
    """The benchmark's NoCloud seed in ``work`` (``seed.iso``), for a login key made there (``key``)."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{work}/key"], check=True)
    with open(f"{work}/key.pub") as handle:
        key = handle.read().strip()
    spec = InstanceSpec(instance_id="iid-bench-0001", hostname="bench",
                        ssh_keys=[SshKey("bench", "ed25519", key)], user_data=user_data(key))
    seed = os.path.join(work, "seed.iso")
    build_seed("nocloud", "iso9660", spec, seed)
    return seed


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


def derive(sample: dict, agent: str) -> None:
    """The figures computed from a sample's lines: "boot finished", and SSH ready and boot finished
    counted from systemd's "Hostname set to" line instead of power-on. Before that line (firmware,
    kernel, initramfs) both images do the same, and its length varies by up to a second from boot to
    boot under TCG; counted from it, a paired difference holds only what follows, where the agent
    acts (its generator runs right after it). Series saved before it was recorded have neither."""
    sample["finished_at"] = finished_at(sample, agent)
    start = sample.get("hostname_at")
    for key, derived in (("ssh_ready_at", "ssh_after_hostname"), ("finished_at", "finished_after_hostname")):
        value = sample.get(key)
        sample[derived] = None if start is None or value is None else round(value - start, 3)


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
    load = os.getloadavg()[0]
    result = run_boot(image, workdir, accel=accel, accel_reason=reason, seeds=[seed], timeout=timeout,
                      ssh_timeout=90, keep=True, overlay=overlay)
    console = result.vm.console if result.vm else None
    probe = result.vm.ssh_probe if result.vm else None
    sample = {"stages": stage_seconds(result), "sysinit_at": sysinit_at(result), "ssh_ready_at": result.ssh_ready_at,
              "sshd_started_at": sshd_started_at(list(console.lines)) if console else None,
              "ssh_probe": probe.counts.as_dict() if probe else None,
              "multi_user_at": console_at(result, MULTI_USER),
              "collected_at": result.collected_at, "agent_done_at": result.agent_done_at,
              "all_keys_at": all_keys_at(result), "timed_out": result.timed_out, "load_before": round(load, 2)}
    sample["hostname_at"] = console_at(result, HOSTNAME)
    derive(sample, image.agent)
    sample["agent_total"] = sum(sample["stages"].values()) if sample["stages"] else None
    if result.vm:
        result.vm.stop()
    sample["load_after"] = round(os.getloadavg()[0], 2)
    sample["intervals"] = intervals_of(result.console_log) if os.path.exists(result.console_log) else {}
    return sample, result


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}{unit}"


COLUMNS = (("sysinit_at", "sysinit.target"), ("ssh_ready_at", "SSH ready"), ("sshd_started_at", "sshd started"),
           ("all_keys_at", "all host keys"), ("finished_at", "boot finished"), ("collected_at", "collector done"),
           ("agent_total", "agent time"))


def table(title: str, samples: dict[str, list[dict]]) -> list[str]:
    medians = {agent: {key: median([r.get(key) for r in runs]) for key, _ in COLUMNS}
               for agent, runs in samples.items()}
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


# two-sided 95% quantiles of Student's t by degrees of freedom (1.96 beyond the table)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
       11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
       20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000}
DIFF_METRICS = (("sysinit_at", "sysinit.target"), ("ssh_ready_at", "SSH ready"), ("sshd_started_at", "sshd started"),
                ("all_keys_at", "all host keys"), ("finished_at", "boot finished"),
                ("ssh_after_hostname", "SSH ready, from systemd's hostname line"),
                ("finished_after_hostname", "boot finished, from systemd's hostname line"))


def t95(df: int) -> float:
    return T95.get(df) or next((T95[k] for k in sorted(T95) if k >= df), 1.96)


def paired(runs: list[dict], base: list[dict], key: str) -> list[float]:
    """Per round: this agent's value minus the image without an agent's (rounds where both have one)."""
    return [round(a[key] - b[key], 3) for a, b in zip(runs, base) if a.get(key) is not None and b.get(key) is not None]


def spread(diffs: list[float]) -> dict | None:
    """Median, mean, 95% confidence interval of the mean and range of paired differences."""
    if not diffs:
        return None
    mean = statistics.fmean(diffs)
    half = t95(len(diffs) - 1) * statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else None
    return {"n": len(diffs), "median": round(statistics.median(diffs), 2), "mean": round(mean, 2),
            "ci95": None if half is None else [round(mean - half, 2), round(mean + half, 2)],
            "half_width": None if half is None else round(half, 2), "min": min(diffs), "max": max(diffs),
            "values": diffs}


def differences(samples: dict[str, list[dict]]) -> dict[str, dict[str, dict | None]]:
    base = samples.get("none") or []
    return {agent: {key: spread(paired(runs, base, key)) for key, _ in DIFF_METRICS}
            for agent, runs in samples.items() if agent != "none" and base}


def ci_verdict(series: dict[str, dict[str, list[dict]]], agent: str, metrics: list[str],
               target: float) -> tuple[bool, str]:
    """Are all watched differences' 95% intervals within +-target? And what they are now."""
    parts, done = [], True
    for kind, samples in series.items():
        found = differences(samples).get(agent, {})
        for key in metrics:
            one = found.get(key)
            half = one and one["half_width"]
            done = done and half is not None and half <= target
            now = "-" if not one else f"{one['mean']:+.2f} +- {'?' if half is None else half}"
            parts.append(f"{kind} {key}: {now}")
    return done, "; ".join(parts)


def boot_line(agent: str, what: str, sample: dict) -> str:
    gaps = sample.get("intervals") or {}
    short = ", ".join(f"{label} {value:.2f}" for label, value in gaps.items())
    probe = sample.get("ssh_probe") or {}
    return (f"  {agent:<10} {what}: sysinit {fmt(sample['sysinit_at'])}, SSH {fmt(sample['ssh_ready_at'], digits=2)} "
            f"(sshd started {fmt(sample.get('sshd_started_at'), digits=2)}, {probe.get('to_sshd', '?')} connection(s) "
            f"to sshd), all keys {fmt(sample['all_keys_at'])}, finished {fmt(sample['finished_at'])}, collector "
            f"{fmt(sample['collected_at'])}, agent {fmt(sample['agent_total'])}, load {sample['load_before']:.2f}"
            + (f"\n      intervals: {short}" if short else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--boots", type=int, default=3,
                        help="rounds per image (default 3; at least, with --until-ci)")
    parser.add_argument("--agents", default="none,cloudseed,reference", help="comma list of none, cloudseed, reference")
    parser.add_argument("--reboot", action="store_true", help="also a second boot of each instance")
    parser.add_argument("--json", metavar="FILE", help="also write all samples as JSON")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--until-ci", type=float, metavar="SECONDS",
                        help="after -n rounds, go on until each watched difference's 95%% interval is within +-SECONDS")
    parser.add_argument("--max-rounds", type=int, default=12, help="with --until-ci: stop after this many rounds")
    parser.add_argument("--ci-agent", default="cloudseed", help="the agent whose differences --until-ci watches")
    parser.add_argument("--ci-metrics", default="ssh_ready_at,finished_at", help="the differences --until-ci watches")
    parser.add_argument("--tables-from", metavar="FILE", help="only print the tables of a series saved with --json")
    parser.add_argument("--merge", nargs="+", metavar="FILE",
                        help="only combine series saved with --json (rounds run in separate holds of a quiet "
                             "machine) into one, print its tables, and with --json write it")
    args = parser.parse_args()
    if args.tables_from:
        return tables_from(args.tables_from)
    if args.merge:
        return merge(args.merge, args.json)
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    work = tempfile.mkdtemp(prefix="bench-boot-")
    print(f"console logs under {work}", flush=True)
    seed = bench_seed(work)
    images = {agent: lab_image(agent) for agent in agents}
    first = next(iter(images.values()))
    accel, reason = choose_accel("auto", first.kernel, first.initrd)
    load = os.getloadavg()
    print(f"accelerator: {accel} ({reason}); {args.boots} rounds, alternating; load at start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    samples: dict[str, list[dict]] = {agent: [] for agent in agents}
    reboots: dict[str, list[dict]] = {agent: [] for agent in agents}
    metrics = [m.strip() for m in args.ci_metrics.split(",") if m.strip()]
    stopped = f"{args.boots} rounds (no --until-ci)"
    rounds = args.boots if args.until_ci is None else max(args.boots, args.max_rounds)
    for round_number in range(rounds):
        for agent in agents:
            workdir = os.path.join(work, f"{agent}-{round_number}")
            sample, result = measure(images[agent], workdir, accel, reason, seed, args.timeout)
            samples[agent].append(sample)
            print(boot_line(agent, f"boot {round_number + 1}", sample), flush=True)
            if args.reboot:
                again, _ = measure(images[agent], workdir + "-reboot", accel, reason, seed, args.timeout,
                                   overlay=result.overlay)
                reboots[agent].append(again)
                print(boot_line(agent, f"reboot {round_number + 1}", again), flush=True)
            if os.path.exists(result.overlay):
                os.unlink(result.overlay)
        if args.until_ci is not None and "none" in agents and args.ci_agent in agents:
            series = {"first boot": samples, **({"reboot": reboots} if args.reboot else {})}
            done, now = ci_verdict(series, args.ci_agent, metrics, args.until_ci)
            print(f"  after round {round_number + 1}: {args.ci_agent} - none, mean +- 95% half-width: {now}",
                  flush=True)
            if done and round_number + 1 >= args.boots:
                stopped = f"every watched 95% interval within +-{args.until_ci} s after {round_number + 1} rounds"
                break
            stopped = (f"NOT every watched 95% interval within +-{args.until_ci} s after {round_number + 1} rounds "
                       f"(--max-rounds {args.max_rounds})")
    end = os.getloadavg()
    print(f"\nload at end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}; stopped: {stopped}\n")
    report(samples, reboots if args.reboot else None)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as handle:
            json.dump({"accel": accel, "load_start": load, "load_end": end, "stopped": stopped,
                       "rounds": len(next(iter(samples.values()))), "console_logs": work, "samples": samples,
                       "reboots": reboots, "differences": {"first boot": differences(samples),
                                                           "reboot": differences(reboots) if args.reboot else {}}},
                      handle, indent=1)
    return 0


def difference_table(title: str, samples: dict[str, list[dict]]) -> list[str]:
    lines = [f"### {title}: differences against no agent, paired by round (seconds)", "",
             "| agent | difference | n | median | mean | 95% interval of the mean | range |",
             "|---|---|---|---|---|---|---|"]
    for agent, found in differences(samples).items():
        for key, label in DIFF_METRICS:
            one = found.get(key)
            if one:
                interval = "-" if one["ci95"] is None else f"{one['ci95'][0]:+.2f} .. {one['ci95'][1]:+.2f}"
                lines.append(f"| {agent} | {label} | {one['n']} | {one['median']:+.2f} | {one['mean']:+.2f} | "
                             f"{interval} | {one['min']:+.2f} .. {one['max']:+.2f} |")
    return lines


def report(samples: dict[str, list[dict]], reboots: dict[str, list[dict]] | None) -> None:
    print("\n".join(table("first boot", samples)))
    print()
    print("\n".join(difference_table("first boot", samples)))
    if reboots:
        print()
        print("\n".join(table("reboot of the same instance", reboots)))
        print()
        print("\n".join(difference_table("reboot", reboots)))
    stages = ("local", "network", "config", "final")
    print("\n| agent | " + " | ".join(stages) + " |\n" + "|---" * (len(stages) + 1) + "|")
    for agent, runs in samples.items():
        if agent != "none":
            print(f"| {agent} | " + " | ".join(fmt(median([r['stages'].get(s) for r in runs])) for s in stages) + " |")
    for title, series in (("first boot", samples), ("reboot", reboots or {})):
        for agent, runs in series.items():
            lags = [round(r["ssh_ready_at"] - r["sshd_started_at"], 2) for r in runs
                    if r.get("ssh_ready_at") is not None and r.get("sshd_started_at") is not None]
            if lags:
                print(f"\n{agent}, {title}: SSH ready (host probe) - sshd started (console line), median "
                      f"{statistics.median(lags):+.2f}   {lags}")
    for title, series in (("first boot", samples), ("reboot", reboots or {})):
        for agent, runs in series.items():
            labels = list(dict.fromkeys(label for r in runs for label in (r.get("intervals") or {})))
            if labels:
                print(f"\n{agent}, {title}: intervals, median (every boot)")
                for label in labels:
                    values = [r["intervals"][label] for r in runs if label in (r.get("intervals") or {})]
                    print(f"  {label:<28} {statistics.median(values):6.2f}   {values}")


def _has_reboots(part: dict) -> bool:
    """Whether a saved series has reboots: its reboot samples (a series of one agent, no "none" to
    pair with, has no reboot differences but does have reboots)."""
    return any((part.get("reboots") or {}).values())


def merge(paths: list[str], out: str | None) -> int:
    """Series saved with --json, one after the other, as one: each keeps its rounds (a round's boots
    stay paired), the differences are recomputed over all of them. The parts must have measured the
    same agents, all with reboots or all without."""
    parts = []
    for path in paths:
        with open(path) as handle:
            parts.append(json.load(handle))
    agents = list(parts[0]["samples"])
    for path, part in zip(paths, parts):
        if list(part["samples"]) != agents:
            print(f"{path}: agents {', '.join(part['samples'])}, not {', '.join(agents)} as {paths[0]}",
                  file=sys.stderr)
            return 2
        if _has_reboots(part) != _has_reboots(parts[0]):
            print(f"{path}: {'with' if _has_reboots(part) else 'without'} reboots, unlike {paths[0]}", file=sys.stderr)
            return 2
    with_reboots = _has_reboots(parts[0])
    samples = {agent: [s for part in parts for s in part["samples"][agent]] for agent in agents}
    reboots = {agent: [s for part in parts for s in (part.get("reboots") or {}).get(agent, [])] for agent in agents}
    for series in (samples, reboots):
        for agent, runs in series.items():
            for sample in runs:
                derive(sample, agent)
    accels = sorted({part["accel"] for part in parts})
    print(f"{len(parts)} parts, {len(samples[agents[0]])} rounds, accelerator {', '.join(accels)}; load at start and "
          "end of each part: " + "; ".join(f"{part['load_start'][0]:.2f} / {part['load_end'][0]:.2f}" for part in parts)
          + "\n")
    report(samples, reboots if with_reboots else None)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as handle:
            json.dump({"accel": ", ".join(accels), "load_start": parts[0]["load_start"],
                       "load_end": parts[-1]["load_end"],
                       "parts": [{"file": os.path.basename(path), "rounds": part["rounds"],
                                  "load_start": part["load_start"], "load_end": part["load_end"],
                                  "stopped": part.get("stopped"), "console_logs": part.get("console_logs")}
                                 for path, part in zip(paths, parts)],
                       "stopped": "; ".join(str(part.get("stopped")) for part in parts),
                       "rounds": len(samples[agents[0]]), "samples": samples,
                       "reboots": reboots if with_reboots else {},
                       "differences": {"first boot": differences(samples),
                                       "reboot": differences(reboots) if with_reboots else {}}},
                      handle, indent=1)
    return 0


def tables_from(path: str) -> int:
    """The tables of a series saved with --json, "boot finished" recomputed from the saved lines."""
    with open(path) as handle:
        saved = json.load(handle)
    for series in (saved["samples"], saved.get("reboots") or {}):
        for agent, runs in series.items():
            for sample in runs:
                derive(sample, agent)
    if saved.get("load_start"):
        print("load at start " + " ".join(f"{v:.2f}" for v in saved["load_start"]) +
              ", at end " + " ".join(f"{v:.2f}" for v in saved["load_end"]) +
              (f"; stopped: {saved['stopped']}" if saved.get("stopped") else "") + "\n")
    report(saved["samples"], saved.get("reboots") or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
