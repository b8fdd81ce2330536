"""Benchmark: the shell generator's processes and time per run, on several kinds of machine.

Every process the generator starts delays every unit of the boot (under TCG each fork costs tens
of milliseconds), so its cost is counted, not only timed: for each kind of machine (a temporary
root with that machine's DMI strings, files and kernel command line; devices are this host's, and
``--loop`` attaches a cidata ISO with a /dev/disk/by-label link to it, as in the lab's guests,
once with udev's record of it in the root's /run/udev/data as the initramfs leaves it, once without),
the programs it executes and the processes it forks (``strace -f``), and the median wall time of
``--runs`` runs. ``--against SCRIPT`` measures another version of the script beside it (the one
of an older commit: ``git show REV:cloudseed/data/systemd/cloudseed-generator > old``).

Run: .venv/bin/python bench/generator_processes.py [--runs 30] [--against OLD] [--loop]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(PROJECT, "cloudseed", "data", "systemd", "cloudseed-generator")
DMI = "sys/class/dmi/id/"
QEMU = {DMI + "sys_vendor": "QEMU\n", DMI + "product_name": "Standard PC (i440FX + PIIX, 1996)\n",
        DMI + "bios_vendor": "SeaBIOS\n", DMI + "chassis_asset_tag": "\n", DMI + "board_name": "\n"}
MACHINES = {
    "bare QEMU, no datasource": {**QEMU, "etc/cloudseed/cmdline": "root=/dev/vda1 ro console=ttyS0 quiet\n"},
    "lab guest: cidata seed (by-label link with --loop), udev's record": {
        **QEMU, "etc/cloudseed/cmdline": "root=/dev/vda1 ro\n"},
    "lab guest: cidata seed (by-label link with --loop), no udev record": {
        **QEMU, "etc/cloudseed/cmdline": "root=/dev/vda1 ro\n"},
    "OpenStack Nova": {**QEMU, DMI + "product_name": "OpenStack Nova\n", DMI + "sys_vendor": "OpenStack Foundation\n"},
    "AWS Nitro": {DMI + "sys_vendor": "Amazon EC2\n", DMI + "product_name": "m5.large\n",
                  DMI + "product_uuid": "EC2A1B2C-3D4E-5F60-7182-93A4B5C6D7E8\n"},
    "AWS Xen (uuid = serial, case differs)": {DMI + "sys_vendor": "Xen\n", DMI + "product_name": "HVM domU\n",
                                              DMI + "product_uuid": "EC2A1B2C-3D4E-5F60-7182-93A4B5C6D7E8\n",
                                              DMI + "product_serial": "ec2a1b2c-3d4e-5f60-7182-93a4b5c6d7e8\n"},
    "Azure": {DMI + "sys_vendor": "Microsoft Corporation\n", DMI + "product_name": "Virtual Machine\n",
              DMI + "chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77\n"},
    "NoCloud seed directory": {**QEMU, "var/lib/cloud/seed/nocloud/meta-data": "instance-id: i-1\n"},
    "MAAS seed directory": {**QEMU, "var/lib/cloud/seed/maas/meta-data/instance-id": "node-1\n"},
    "RHEV without a floppy (pnp ids read)": {DMI + "product_name": "RHEV Hypervisor\n",
                                             DMI + "sys_vendor": "Red Hat\n"},
    "VMware with vmtoolsd": {DMI + "product_name": "VMware Virtual Platform\n", DMI + "sys_vendor": "VMware, Inc.\n",
                             "usr/bin/vmtoolsd": "#!/bin/sh\n"},
    "LXD VM": {**QEMU, DMI + "board_name": "LXD\n"},
    "WSL": {"proc/sys/kernel/osrelease": "5.15.153.1-microsoft-standard-WSL2\n"},
}


def make_root(top: str, files: dict[str, str]) -> str:
    root = os.path.join(top, "root")
    for inner, text in files.items():
        path = os.path.join(root, inner)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        if inner.startswith("usr/bin/"):
            os.chmod(path, 0o755)
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    return root


def run(script: str, root: str, out: str) -> subprocess.CompletedProcess:
    shutil.rmtree(os.path.join(root, "run/cloudseed"), ignore_errors=True)
    env = {"CLOUDSEED_ROOT": root, "CLOUDSEED_BIN": "/bin/false", "PATH": os.environ["PATH"]}
    return subprocess.run(["/bin/sh", script, out], env=env, capture_output=True, text=True)


def processes(script: str, root: str, out: str) -> tuple[int, int]:
    """(programs executed besides the shell, processes forked) for one run, from strace -f."""
    trace = os.path.join(out, "trace")
    shutil.rmtree(os.path.join(root, "run/cloudseed"), ignore_errors=True)
    env = {"CLOUDSEED_ROOT": root, "CLOUDSEED_BIN": "/bin/false", "PATH": os.environ["PATH"]}
    subprocess.run(["strace", "-f", "-qq", "-o", trace, "-e", "trace=execve,fork,vfork,clone,clone3",
                    "/bin/sh", script, out], env=env, capture_output=True, check=True)
    with open(trace) as f:
        lines = f.read().splitlines()
    # a call interrupted by another process's is split in two lines: its result is on "<... resumed>"
    done = [line for line in lines if not line.endswith("<unfinished ...>")]
    execs = sum(1 for line in done if re.search(r"execve(\(| resumed>).*= 0$", line)) - 1  # the shell itself
    forks = sum(1 for line in done if re.search(r"(clone3?|v?fork)(\(| resumed>).*= [1-9][0-9]*$", line))
    return execs, forks


def decision(script: str, root: str, out: str) -> str:
    run(script, root, out)
    for state in ("enabled", "disabled"):
        path = os.path.join(root, "run/cloudseed", state)
        if os.path.exists(path):
            with open(path) as f:
                text = f.read().strip()
            return json.loads(text)["reason"] if state == "enabled" else text
    return "?"


def wall_ms(script: str, root: str, out: str, runs: int) -> float:
    run(script, root, out)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        run(script, root, out)
        samples.append(time.perf_counter() - start)
    return round(statistics.median(samples) * 1000, 1)


def attach_seed(top: str) -> str:
    """A cidata ISO attached read-only as a loop device."""
    os.makedirs(f"{top}/iso")
    with open(f"{top}/iso/meta-data", "w") as f:
        f.write("instance-id: bench\n")
    subprocess.run(["genisoimage", "-quiet", "-V", "cidata", "-r", "-o", f"{top}/seed.iso", f"{top}/iso"], check=True)
    return subprocess.run(["losetup", "-f", "--show", "-r", f"{top}/seed.iso"], check=True,
                          capture_output=True, text=True).stdout.strip()


def write_udev_record(root: str, device: str) -> None:
    """udev's blkid builtin's reading of ``device`` where udev keeps it (E: lines), inside ``root``."""
    name = os.path.basename(device)
    proc = subprocess.run(["udevadm", "test-builtin", "blkid", f"/sys/class/block/{name}"], check=True,
                          capture_output=True, text=True)
    with open(f"/sys/class/block/{name}/dev") as f:
        major_minor = f.read().strip()
    os.makedirs(f"{root}/run/udev/data", exist_ok=True)
    with open(f"{root}/run/udev/data/b{major_minor}", "w") as f:
        f.writelines(f"E:{line}\n" for line in proc.stdout.splitlines() if line.startswith("ID_") and "=" in line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--against", help="another version of the script, measured beside this one")
    parser.add_argument("--loop", action="store_true", help="attach a cidata ISO (root) for the lab guest kind")
    args = parser.parse_args()
    scripts = {"this": SCRIPT, **({"against": args.against} if args.against else {})}
    results = {}
    top = tempfile.mkdtemp(prefix="cloudseed-genbench-")
    device = None
    try:
        for kind, files in MACHINES.items():
            if device and not kind.startswith("lab guest"):  # the others probe without the seed
                subprocess.run(["losetup", "-d", device], capture_output=True)
                device = None
            case = tempfile.mkdtemp(dir=top)
            root = make_root(case, files)
            if kind.startswith("lab guest") and args.loop:  # attached for these kinds only
                if device is None:
                    device = attach_seed(top)
                os.makedirs(f"{root}/dev/disk/by-label")
                os.symlink(device, f"{root}/dev/disk/by-label/cidata")
                if kind.endswith("udev's record"):
                    write_udev_record(root, device)
            out = os.path.join(case, "out")
            os.makedirs(out)
            row = {}
            for name, script in scripts.items():
                execs, forks = processes(script, root, out)
                row[name] = {"programs": execs, "forks": forks, "ms": wall_ms(script, root, out, args.runs),
                             "decision": decision(script, root, out)[:90]}
            results[kind] = row
    finally:
        if device:
            subprocess.run(["losetup", "-d", device], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
